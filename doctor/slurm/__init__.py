"""Slurm: read an sbatch submission (its options, #SBATCH lines and script), check it against the cluster before
it is submitted, submit and watch the job through scontrol/squeue/sacct, and turn what Slurm recorded into a
verdict. Slurm's own commands are the only interface used (no slurmrestd, no Python bindings)."""
