"""How many of dfdoctor's modules one `dfdoctor launch -- python -c 'print(1)'` passes through, in dfdoctor's own
process (the pre-launch checks' forked workers, the recorder and the probes are other processes, not counted).

Two counts: the dfdoctor modules imported (sys.modules at the end), and those where at least one function ran
(sys.setprofile / threading.setprofile on every Python call; a module's own body does not count). Run:

    .venv/bin/python bench/launch_modules.py                       # this checkout, with the pre-launch checks
    .venv/bin/python bench/launch_modules.py --no-check            # the launch pipeline alone
    .venv/bin/python bench/launch_modules.py --no-check --tree DIR --old   # a checkout from before the one
                                                                   # import name (modules named doctor.*)

`--old` runs DIR's `doctor.cli` from DIR on sys.path; use it with --no-check (the installed entry points name
this checkout's checks).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

DRIVER = r'''
import json, sys, threading
root, old, no_check = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1"
folders = tuple(root + "/" + f + "/" for f in ("doctor", "checks", "trainer"))
ran = set()
def prof(frame, event, arg):
    if event == "call" and frame.f_code.co_name != "<module>" and frame.f_code.co_filename.startswith(folders):
        ran.add(frame.f_code.co_filename)
if old:
    sys.path.insert(0, root)
    from doctor.cli import run
    prefixes = ("doctor", "checks", "trainer")
else:
    from dfdoctor.cli.main import run
    prefixes = ("dfdoctor",)
argv = ["launch", "--watch", "5", "--format", "json", "--output", "launch.json"] + (["--no-check"] if no_check else [])
argv += ["--", sys.executable, "-c", "print(1)"]
sys.setprofile(prof)
threading.setprofile(prof)
try:
    rc = run(argv)
finally:
    sys.setprofile(None)
    threading.setprofile(None)
mods = sorted(m for m in sys.modules if m.split(".")[0] in prefixes)
sys.stderr.write("@@" + json.dumps({"rc": rc, "imported": mods, "ran": sorted(ran)}) + "\n")
'''


def main(argv: list[str]) -> int:
    old = "--old" in argv
    no_check = "--no-check" in argv
    tree = Path(argv[argv.index("--tree") + 1]).resolve() if "--tree" in argv else REPO
    with tempfile.TemporaryDirectory(prefix="dfd-launch-modules-") as work:
        p = subprocess.run([sys.executable, "-c", DRIVER, str(tree), "1" if old else "0", "1" if no_check else "0"],
                           cwd=work, capture_output=True, text=True, timeout=300)
    answer = json.loads(p.stderr.rpartition("@@")[2])
    print(json.dumps({"tree": str(tree), "checks": not no_check, "exit_code": answer["rc"],
                      "modules_imported": len(answer["imported"]), "modules_run": len(answer["ran"]),
                      "ran": [str(Path(f).relative_to(tree)) for f in answer["ran"]]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
