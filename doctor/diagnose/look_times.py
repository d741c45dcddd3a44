"""How a look at a live job's stacks is paced and bounded (diagnose/jobstacks.py takes the looks): here alone,
so that the watch (watch/settle.py, launch/lookahead.py) knows them without importing the looks and psutil, which
a job that ends in a moment never needs (issue 45)."""

MAX_PROCESSES = 32  # a node's ranks and their DataLoader workers; beyond that the first ones tell the story
GAP_S = 1.0  # between the two samples
AHEAD_GAPS = 3  # a first round taken ahead (launch/lookahead.py) serves a look this many gaps later at the most
DUMP_TIMEOUT_S = 5.0
