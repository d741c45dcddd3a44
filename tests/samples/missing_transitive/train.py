import json

from data import load_batches
