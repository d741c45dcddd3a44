"""Prints a line, then sleeps in short naps until the file named by its argument exists; then prints `woke`
and sleeps on (a batch job whose quiet spell ends just as dfdoctor looks at its stacks on its node)."""
import os
import sys
import time

print("started", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.1)
print("woke", flush=True)
while True:
    time.sleep(600)
