"""Works on the CPU and prints a short line now and then, without -u: after a warning on stderr (which is not
buffered) nothing reaches the log, though the job makes progress."""
import sys

print("UserWarning: something at import", file=sys.stderr)
x = 0
for step in range(10**9):
    for i in range(2000000):
        x += i
    print(f"step {step}")
