"""A short warm-up that counts to its total (`warmup step N/30`, every 0.2 s: 6 s), then a long silence, as a job
that warms up and then hangs compiling: the warm-up is a phase about to end, not the job's loop, so a launch
must not call it running; the silence is named from the stacks (here `sleeping`)."""
import time

for step in range(1, 31):
    print(f"warmup step {step}/30 loss {1.0 / step:.4f}", flush=True)
    time.sleep(0.2)
time.sleep(600)
