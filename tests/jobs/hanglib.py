"""A local module whose import never finishes: it waits on a lock nobody will release."""
import threading

_lock = threading.Lock()
_lock.acquire()
_lock.acquire()
