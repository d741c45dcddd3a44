"""A job whose start-up prints look busy and repeat, then dies before training: SILENT seconds without output
(default 0; torch and CUDA coming up, on a GPU machine 5-10 s), a model summary printed at once (48 rows of one
shape), four checkpoint shards loaded a second apart, then its data file is not found (5.5 s after its first
line). Neither the table nor the shards are the job's loop, and the settle time counts from its first line: a
launch must never call it running."""
import sys
import time

from last_in_line import last_in_line

# the silent start works, as importing torch and bringing CUDA up do: a job asleep there would be named
# `sleeping` by the first look at its stacks, and the test would race that look against the sleep's end
back_in_line = last_in_line()  # busy, but the machine's other work goes first
end = time.monotonic() + (float(sys.argv[1]) if len(sys.argv) > 1 else 0.0)
while time.monotonic() < end:
    pass
back_in_line()  # its recorder (in the same autogroup) times the lines that follow as before
print("building the model", flush=True)
for i in range(48):
    print(f"layers.{i}.attn.weight [768, 768]", flush=True)
for shard in range(1, 5):
    time.sleep(1.0)
    print(f"Loading checkpoint shard {shard}/4", flush=True)
time.sleep(1.5)
open("data/train.bin", "rb")
