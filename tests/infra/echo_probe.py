"""A harmless probe for the target tests: echoes its arguments, a chosen variable and where it ran."""

import os
import socket
import sys
import time

# dfdoctor's own probe helpers: beside this file on a target (remote_probe ships them), in checks/probes here
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "checks", "probes")]
from _probe_support import answer, install_stack_dump  # noqa: E402

install_stack_dump()
print("echo probe ran")
if "--hang" in sys.argv:
    time.sleep(120)
answer({"args": sys.argv[1:], "var": os.environ.get("DFD_TEST_VAR"), "hostname": socket.gethostname(),
        "marker": os.environ.get("DFDOCTOR_TEST_SESSION"), "cwd": os.getcwd(),
        "dir": os.path.dirname(os.path.abspath(__file__)), "no_site": bool(sys.flags.no_site)})
