"""Issue 45: what every dfdoctor start pays (some 1,100 starts in a run of the suite). The report's platform string
is the one `platform.platform()` gives, read without forking `uname -p`; and the command line's modules are
loaded without the collector walking them, frozen once loaded, with collection on again afterwards. Each in a fresh
interpreter, as a start is."""

from __future__ import annotations

import json
import subprocess
import sys

# every process start Python can make, seen by an audit hook (it sees what the C code of subprocess does too)
_NO_PROCESS = """
import json, sys
started = []
def hook(event, args):
    if event in ("subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.system"):
        started.append([event, repr(args)[:200]])
sys.addaudithook(hook)
from dfdoctor.engine import environment_facts
facts = environment_facts(None, [])
seen = list(started)
import platform
print(json.dumps({"started": seen, "os": facts["os"], "platform": platform.platform()}))
"""


def test_the_reports_platform_is_platforms_own_and_starts_no_process():
    p = subprocess.run([sys.executable, "-c", _NO_PROCESS], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["started"] == [], out["started"]  # platform.platform() forked `uname -p` here
    assert out["os"] == out["platform"], out


_COLLECTIONS = """
import gc, json
during = []
gc.callbacks.append(lambda phase, info: during.append(info["generation"]) if phase == "start" else None)
import dfdoctor.cli.main
print(json.dumps({"during": during, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}))
"""


def test_the_command_lines_modules_load_without_collections_and_stay_frozen_with_collection_on():
    p = subprocess.run([sys.executable, "-c", _COLLECTIONS], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["enabled"] is True  # collection is on again for what the command does
    assert out["frozen"] > 10_000, out  # what the imports made: walked by no later collection
    # the package's own __init__ (model, registry) loads before the command line's first line: a few collections
    # there, where without the pause the command line's imports made some 50 more
    assert len(out["during"]) < 25, out
