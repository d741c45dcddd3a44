"""Reads the run's settings at import time (a classic start-up crash)."""
import os

NUM_DRAFTERS = int(os.environ["DFLASH_NUM_DRAFTERS"])
