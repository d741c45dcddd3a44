"""The watch of a launched job: its policy (`policy.py`: observations in, a decision out) and the rules of pace it
reads (`rhythm.py`: when a silence means something; `settle.py`: when "running" may be said)."""
