"""Prints once, then sleeps for ten minutes."""
import time

print("warming up", flush=True)
time.sleep(600)
