"""A tensor-parallel example's guard: every rank counts the GPUs and, finding too few, prints why and exits 0
(`sys.exit()`). Under torchrun on a CPU machine every rank "succeeds" having done nothing: `did-nothing`. With
`stderr` the reason goes through logging; with `together` the ranks meet (no file written), then print as python -u
does: the text, then the newline, two writes, so ranks printing at once leave "whywhy" and then the newlines. GPUs
are counted in /dev (what torch.cuda.device_count() finds here) and ranks meet over a socket, not torch.distributed:
the verdict reads only the output, the exit and the files (diagnose/did_nothing.py); torch cost ~1.7 CPU-s a rank."""
import glob
import logging
import os
import socket
import sys
import time

MIN_GPUS = 4

if len(glob.glob("/dev/nvidia[0-9]*")) < MIN_GPUS:
    why = f"Unable to locate sufficient {MIN_GPUS} gpus to run this example. Exiting."
    if sys.argv[1:] == ["together"]:
        place = f"\0dfdoctor-needs-gpus-{os.getppid()}"  # the agent's: both ranks' parent (abstract: no file)
        if os.environ["RANK"] == "0":
            with socket.socket(socket.AF_UNIX) as s:
                s.bind(place)
                s.listen(1)
                peer = s.accept()[0]
        else:
            peer = socket.socket(socket.AF_UNIX)
            for _ in range(600):
                try:
                    peer.connect(place)
                    break
                except OSError:
                    time.sleep(0.05)
        os.write(1, why.encode())
        peer.sendall(b".")  # the barrier: each waits for the other's byte
        peer.recv(1)
        os.write(1, b"\n")
    else:
        logging.error(why) if sys.argv[1:] == ["stderr"] else print(why)
    sys.exit()

rank = int(os.environ.get("RANK", "0"))
for step in range(100):
    print(f"rank {rank} step {step}", flush=True)
