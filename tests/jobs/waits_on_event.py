"""Prints once, then waits on a threading.Event in its only thread: nothing can ever set it (issue 41)."""
import threading

print("start", flush=True)
threading.Event().wait()
