"""Runs and logs, but through a logging FileHandler to another file: `log-elsewhere`."""
import logging
import sys
import time

logging.basicConfig(filename=sys.argv[1], level=logging.INFO)
for step in range(10**6):
    logging.info("step %d", step)
    time.sleep(0.2)
