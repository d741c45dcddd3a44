"""A job that ignores SIGTERM (a handler that only logs it), as a training loop with a careless signal handler
does: `dfdoctor stop` must SIGKILL it once its grace has passed. It also starts a worker that ignores SIGTERM."""
import multiprocessing
import signal
import time


def ignore(*_):
    print("SIGTERM ignored", flush=True)


def work():
    signal.signal(signal.SIGTERM, ignore)
    while True:
        time.sleep(0.1)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, ignore)
    multiprocessing.Process(target=work, daemon=False).start()
    print("started", flush=True)
    while True:
        time.sleep(0.1)
