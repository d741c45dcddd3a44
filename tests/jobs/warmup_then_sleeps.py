"""A warm-up that counts to its total (`warmup step N/60`, one step each 0.2 s of wall time: 12 s, past the default
settle time), then a long silence, as a job that warms up and then hangs compiling (the bundled trainer's target
steps before its drafters compile). The warm-up is a phase about to end, not the job's loop, so a launch must not
call it running, even once it has lived past the settle time; the silence after it is named from the stacks (here
`sleeping`). Its steps follow the clock, not the CPU it gets: on a loaded machine (CI ran it at one line in 1.5 s)
a step counter that slowed with the load would be a loop 60 s from its end, truly running, and the test would
measure the load instead of the rule."""
import time

start = time.monotonic()
step = 0
while step < 60:
    step = min(60, int((time.monotonic() - start) / 0.2) + 1)
    print(f"warmup step {step}/60 loss {1.0 / step:.4f}", flush=True)
    time.sleep(max(0.0, start + step * 0.2 - time.monotonic()))
time.sleep(600)
