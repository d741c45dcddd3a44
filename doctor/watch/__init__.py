"""The watch of a launched job, one for every kind of job: its loop (`loop.py`: a source handed in observes, the
policy decides, the loop acts), its policy (`policy.py`: observations in, a decision out) and the rules of pace it
reads (`rhythm.py`: when a silence means something; `settle.py`: when "running" may be said)."""
