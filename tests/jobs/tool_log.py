"""Prints nothing and waits forever, while a helper process it started (as wandb's service does) appends to a log
under wandb/ (or the folder argv[2] names under argv[1], a Ray session's logs) every 0.2 s: that log grows on the
tool's timer, not with the job's progress."""
import multiprocessing
import os
import sys
import threading
import time


def tool(path):
    with open(path, "a") as f:
        while True:
            f.write("heartbeat\n")
            f.flush()
            time.sleep(0.2)


if __name__ == "__main__":
    where = sys.argv[2] if len(sys.argv) > 2 else os.path.join("wandb", "run-1", "logs")
    path = os.path.join(sys.argv[1], where, "debug-internal.log")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    multiprocessing.Process(target=tool, args=(path,), daemon=True).start()
    threading.Event().wait()
