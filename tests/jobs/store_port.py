"""A port for a test job's own one-rank store, for tests/jobs' scripts run from this folder (it is their sys.path[0])."""

import random
import socket


def free_port() -> int:
    """Below the ephemeral range: a port from binding port 0 may go to any outgoing connection before the store
    listens (dfdoctor's cuda.nccl met that in a full test run: EADDRINUSE)."""
    for port in random.sample(range(20000, 32768), 50):
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below 32768")
