"""A job that counts what it indexed for 1.5 s (five lines well inside the 3 s that make a loop, also when a loaded
machine stretches them: at 0.5 s apart, CI's whole-suite run spread them over 3 s and the launch said "in its
loop"), goes quiet for 12 s (busy, printing nothing: its stacks name no
wait), prints one line and dies 3 s later on a missing data file. Its output was steady once, and it has printed
for longer than the settle time; but one line after a silence is not output growing again. A launch must see it
die, not call it running at that line. It prints with flush=True and no -u: its quiet time is not a block
buffer either (its first lines reached the log one by one)."""
import time

from last_in_line import last_in_line

print("loading the tokenizer", flush=True)
for batch in range(1, 6):
    print(f"indexed {batch * 1000} documents", flush=True)
    time.sleep(0.3)
back_in_line = last_in_line()  # busy, but the machine's other work goes first
end = time.monotonic() + 12.0
while time.monotonic() < end:
    pass
back_in_line()  # its recorder (in the same autogroup) times the line that follows as before
print("index built: 5000 documents in 14.5 s", flush=True)
time.sleep(3.0)
open("data/train.bin", "rb")
