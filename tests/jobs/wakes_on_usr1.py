"""Prints a line, then sleeps; SIGUSR1 makes it print `woke` and sleep on (a job whose quiet spell ends just as
dfdoctor looks at its stacks)."""
import signal
import time

signal.signal(signal.SIGUSR1, lambda *_: print("woke", flush=True))
print("started", flush=True)
while True:
    time.sleep(600)
