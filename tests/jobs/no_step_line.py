"""A healthy job whose lines carry no number (a status word every 0.2 s, for SECONDS, default 60): it shows
no loop, so a launch waits out its settle time before calling it running."""
import sys
import time

WORDS = ("warming", "working", "still working", "making progress", "busy")
end = time.time() + float(sys.argv[1] if len(sys.argv) > 1 else 60)
i = 0
while time.time() < end:
    print(WORDS[i % len(WORDS)], flush=True)
    i += 1
    time.sleep(0.2)
