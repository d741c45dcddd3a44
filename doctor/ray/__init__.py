"""Ray as a placement: `ray job submit` read as sbatch is read, watched over Ray's HTTP APIs alone (docs/ray.md)."""
