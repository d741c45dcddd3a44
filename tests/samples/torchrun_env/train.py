"""Launched with torchrun: reads the worker's rank at import time, as many scripts do."""
import os

import dist_setup
