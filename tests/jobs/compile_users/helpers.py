import threading
lock = threading.Lock()
def train_loop(fn):
    for _ in range(3):
        with lock:
            out = fn(1, 2, 3)
        out.backward()
