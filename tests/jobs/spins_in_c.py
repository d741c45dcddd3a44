"""Prints a step every 0.1 s for 3 s, then spins in C for ever (a regular expression that backtracks without end,
holding the GIL): CPU burns, no Python frame moves, nothing is printed."""
import re
import time

for step in range(30):
    print(f"step {step}", flush=True)
    time.sleep(0.1)
re.match(r"(a*)*b", "a" * 64)
