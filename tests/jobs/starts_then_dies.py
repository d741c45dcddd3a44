"""A job whose start-up prints look busy and repeat, then dies before training: SILENT seconds without output
(default 0; torch and CUDA coming up, on a GPU machine 5-10 s), a model summary printed at once (48 rows of one
shape), four checkpoint shards loaded a second apart, then its data file is not found (5.5 s after its first
line). Neither the table nor the shards are the job's loop, and the settle time counts from its first line: a
launch must never call it running."""
import os
import sys
import time

# the silent start works, as importing torch and bringing CUDA up do: a job asleep there would be named
# `sleeping` by the first look at its stacks, and the test would race that look against the sleep's end
os.nice(19)  # busy, but last in line for the CPU: the machine's other work goes first
if os.getsid(0) == os.getpid():  # a session of its own (dfdoctor's spawn): the kernel's autogroup is the job's
    # alone, and with autogroups on, nice counts only inside one: the autogroup's own nice puts the job last
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write("19")
    except OSError:
        pass  # no autogroups (CONFIG_SCHED_AUTOGROUP off): os.nice above is the whole of it
end = time.monotonic() + (float(sys.argv[1]) if len(sys.argv) > 1 else 0.0)
while time.monotonic() < end:
    pass
print("building the model", flush=True)
for i in range(48):
    print(f"layers.{i}.attn.weight [768, 768]", flush=True)
for shard in range(1, 5):
    time.sleep(1.0)
    print(f"Loading checkpoint shard {shard}/4", flush=True)
time.sleep(1.5)
open("data/train.bin", "rb")
