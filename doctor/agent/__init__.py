"""Everything of dfdoctor that runs on a job's machine, in the job's own interpreter or a target's python: the flight
recorder, the target agent, the probe bootstrap, and what they share (/proc reading, the atomic write, the masking
rules). Standard library only, Python 3.6 syntax; nothing here imports dfdoctor outside this package.

It travels as real files: `python AGENT PART ...` with AGENT this folder here, its zip on a target, or the zip on
stdin behind the fixed loader `__main__.py` (`dfdoctor.agent.ship` builds and sends them; it stays here).
"""
