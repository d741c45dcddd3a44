"""Prints a line without flushing, then sleeps through its setup: run without -u, the line waits in Python's block
buffer, so the log stays empty while the job is alive and well."""
import time


def setup():
    print("setting up")
    time.sleep(600)  # line 8: where the verdict must say it waits


setup()
