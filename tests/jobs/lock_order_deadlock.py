"""A loader thread and a trainer thread take two locks in opposite orders: each holds the lock the other waits
for, for ever (issue 41: once named as a lock cycle, then called running)."""
import threading
import time

data, model = threading.Lock(), threading.Lock()
both_hold = threading.Barrier(2)


def loader():
    with data:
        both_hold.wait()
        with model:
            print("loader: never", flush=True)


def trainer():
    with model:
        both_hold.wait()
        with data:
            print("trainer: never", flush=True)


for i in range(5):
    print(f"step {i}", flush=True)
    time.sleep(0.1)
threads = [threading.Thread(target=loader, name="loader"), threading.Thread(target=trainer, name="trainer")]
for t in threads:
    t.start()
for t in threads:
    t.join()
