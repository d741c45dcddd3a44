"""How often one real `dfdoctor launch --no-check -- python -c 'print(1)'` climbs back up from a subpackage
(a floor: `dfdoctor.launch`, `dfdoctor.diagnose`, `dfdoctor.run`, ...) to a module of the ground floor
(`dfdoctor.redact`, `dfdoctor.engine`, ...), in dfdoctor's own process (the recorder is another process).

A climb is a Python call whose caller's module is in a subpackage and whose callee's module is a top-level
`dfdoctor.X` (sys.setprofile on every call). Three figures:
  - sites: distinct (caller file:line -> callee module.function) climbs;
  - calls: how many such calls ran in all;
  - masking: the climbs from the run-folder code (launch/rundir.py before round 6, run/ after) into redact.py,
    how many Redactors were built (`Redactor.__init__`) and how many times masks.json was read.
`--events N` measures instead what each of dfdoctor's notes costs: N notes appended to one run folder that has
masks.json (as a watch that samples stacks appends one per look), the masks.json reads and the time per note.
Run from the repository root with the interpreter of the checkout to measure:

    .venv/bin/python bench/launch_climbs.py            # prints one JSON object
    .venv/bin/python bench/launch_climbs.py --events 200
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile

DRIVER = r'''
import builtins, io, json, pathlib, sys, threading
from dfdoctor.cli.main import run

def mod(frame):
    return frame.f_globals.get("__name__") or ""

sites, calls, masking, built = {}, 0, {}, 0
def prof(frame, event, arg):
    global calls, built
    if event != "call":
        return
    callee, back = mod(frame), frame.f_back
    if not callee.startswith("dfdoctor") or back is None:
        return
    if callee == "dfdoctor.redact" and frame.f_code.co_name == "__init__" and "self" in frame.f_locals \
            and type(frame.f_locals["self"]).__name__ == "Redactor":
        built += 1
    caller = mod(back)
    if caller.count(".") < 2 or callee.count(".") != 1 or not caller.startswith("dfdoctor."):
        return
    if caller.startswith("dfdoctor.checks") or caller.startswith("dfdoctor.trainer"):
        return
    site = f"{caller}:{back.f_lineno} -> {callee}.{frame.f_code.co_name}"
    sites[site] = sites.get(site, 0) + 1
    calls += 1
    if callee == "dfdoctor.redact" and (caller == "dfdoctor.launch.rundir" or caller.startswith("dfdoctor.run.")):
        masking[site] = masking.get(site, 0) + 1

reads = 0
real_open = io.open
def counting_open(file, *a, **k):
    global reads
    if str(file).endswith("masks.json") and "r" in (a[0] if a else k.get("mode", "r")):
        reads += 1
    return real_open(file, *a, **k)
builtins.open = io.open = counting_open
pathlib.Path.read_text = lambda self, *a, **k: (counting_open(self, "r").read())
pathlib.Path.read_bytes = lambda self: (counting_open(self, "rb").read())

argv = ["launch", "--no-check", "--watch", "5", "--format", "json", "--output", "launch.json",
        "--", sys.executable, "-c", "print(1)"]
sys.setprofile(prof)
threading.setprofile(prof)
try:
    rc = run(argv)
finally:
    sys.setprofile(None)
    threading.setprofile(None)
sys.stderr.write("@@" + json.dumps({"rc": rc, "sites": sites, "calls": calls, "masking": masking,
                                    "redactors_built": built, "masks_json_reads": reads}) + "\n")
'''


EVENTS = r'''
import builtins, io, json, os, pathlib, sys, tempfile, time
n = int(sys.argv[1])
try:
    from dfdoctor.run.folder import append_event, new_run
    from dfdoctor.run.masks import keep_prints
except ImportError:  # a checkout from before round 6
    from dfdoctor.launch.rundir import append_event, keep_prints, new_run
os.environ["HF_TOKEN"] = "hf_" + "x" * 34
work = tempfile.mkdtemp()
_, run_dir = new_run(pathlib.Path(work))
keep_prints(run_dir, dict(os.environ), ["python", "train.py", "--api-key", "sk-secretsecret"])
reads = 0
real_open = io.open
def counting_open(file, *a, **k):
    global reads
    reads += str(file).endswith("masks.json")
    return real_open(file, *a, **k)
builtins.open = io.open = counting_open
pathlib.Path.read_text = lambda self, *a, **k: (counting_open(self, "r").read())
t = time.perf_counter()
for i in range(n):
    append_event(run_dir, "stacks-sampled", took_s=0.5, processes=3, waits=["futex"], argv=["python", "train.py"])
took = time.perf_counter() - t
lines = (run_dir / "launcher.jsonl").read_text().splitlines()
sys.stderr.write("@@" + json.dumps({"events": len(lines), "masks_json_reads": reads, "ms_per_event": 1000 * took / n}))
'''


def main(argv: list[str]) -> int:
    if "--events" in argv:
        n = argv[argv.index("--events") + 1]
        p = subprocess.run([sys.executable, "-c", EVENTS, n], capture_output=True, text=True, timeout=300)
        if "@@" not in p.stderr:
            print(p.stdout + p.stderr, file=sys.stderr)
            return 1
        print(p.stderr.rpartition("@@")[2])
        return 0
    with tempfile.TemporaryDirectory(prefix="dfd-launch-climbs-") as work:
        p = subprocess.run([sys.executable, "-c", DRIVER], cwd=work, capture_output=True, text=True, timeout=300)
    if "@@" not in p.stderr:
        print(p.stdout + p.stderr, file=sys.stderr)
        return 1
    a = json.loads(p.stderr.rpartition("@@")[2])
    print(json.dumps({"exit_code": a["rc"], "climb_sites": len(a["sites"]), "climb_calls": a["calls"],
                      "masking_sites": len(a["masking"]), "masking_calls": sum(a["masking"].values()),
                      "redactors_built": a["redactors_built"], "masks_json_reads": a["masks_json_reads"],
                      "sites": dict(sorted(a["sites"].items())), "masking": a["masking"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
