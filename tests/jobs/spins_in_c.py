"""Prints a step every 0.1 s for 3 s, then spins in C for ever (a regular expression that backtracks without end,
holding the GIL): CPU burns, no Python frame moves, nothing is printed.

It sleeps through its first 4 s of silence: no look at a silent job comes before 5 s of silence
(doctor/watch/rhythm.py's GRACE_S), and its test asks `status` once it is 6 s silent, so every look sees it spin,
and a core is not burned for the seconds no look sees."""
import re
import time

for step in range(30):
    print(f"step {step}", flush=True)
    time.sleep(0.1)
time.sleep(4.0)
re.match(r"(a*)*b", "a" * 64)
