"""A trainer reads batches from a multiprocessing Queue; its producer process dies (exit 3) after a few: the
trainer waits in Queue.get() for ever (issue 41)."""
import multiprocessing as mp
import sys
import time


def produce(q):
    for i in range(3):
        q.put(i)
    time.sleep(0.3)
    sys.exit(3)


if __name__ == "__main__":
    mp.set_start_method("fork")
    q = mp.Queue()
    producer = mp.Process(target=produce, args=(q,), name="producer")
    producer.start()
    step = 0
    while True:
        batch = q.get()
        print(f"step {step}: batch {batch}", flush=True)
        step += 1
