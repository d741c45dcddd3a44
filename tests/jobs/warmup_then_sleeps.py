"""A warm-up that counts to its total (`warmup step N/60`, every 0.2 s: 12 s, past the default settle time), then
a long silence, as a job that warms up and then hangs compiling (the bundled trainer's target steps before its
drafters compile). The warm-up is a phase about to end, not the job's loop, so a launch must not call it running,
even once it has lived past the settle time; the silence after it is named from the stacks (here `sleeping`)."""
import time

for step in range(1, 61):
    print(f"warmup step {step}/60 loss {1.0 / step:.4f}", flush=True)
    time.sleep(0.2)
time.sleep(600)
