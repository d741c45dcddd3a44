"""CPU seconds per test and per xdist unit (tests/conftest.py's `work_unit`), and the Python processes each
started: how many were dfdoctor, how many imported torch, how many ran torch.compile, and their own CPU.

    .venv/bin/python bench/test_cpu.py OUT_DIR [pytest args...]   # e.g. OUT_DIR tests/test_stuck.py -n 2
    .venv/bin/python bench/test_cpu.py --summary OUT_DIR          # summarise an earlier run again

Runs the worktree's .venv/bin/pytest with tests/support/cpu_meter.py (per-test CPU of the test process and all it
started, by a cgroup per worker) and, for the run's length only, a start-up hook in the venv (a .pth file that
logs each of its Python processes' start and exit). The hook is removed afterwards, also on Ctrl-C.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV_PY = REPO / ".venv" / "bin" / "python"

# The hook: tiny, and silent on any error (it must not change what a test sees). PYTEST_CURRENT_TEST, which
# pytest sets in the worker's environment during each test, names the test that started the process.
HOOK = r'''
import os
_d = os.environ.get("DFDOCTOR_CPU_METER")
if _d:
    def _dfd_meter_line(event, extra=""):
        try:
            with open("/proc/self/cmdline", "rb") as f:
                argv = f.read().split(b"\0")[:4]
            t = os.times()
            line = repr((event, os.getpid(), [a.decode(errors="replace")[-60:] for a in argv],
                         os.environ.get("PYTEST_CURRENT_TEST", ""), round(t.user + t.system, 3), extra))
            fd = os.open(_d + "/starts.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(fd, (line + "\n").encode())
            os.close(fd)
        except Exception:
            pass
    def _dfd_meter_exit():
        import sys
        m = sys.modules
        _dfd_meter_line("exit", ("torch" if "torch" in m else "") + (",dynamo" if "torch._dynamo" in m else "")
                        + (",inductor" if "torch._inductor.compile_fx" in m else ""))
    import atexit
    atexit.register(_dfd_meter_exit)
    _dfd_meter_line("start")
'''


def site_packages() -> Path:
    out = subprocess.run([str(VENV_PY), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return Path(out)


def run(out: Path, args: list[str]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    site = site_packages()
    mod, pth = site / "_dfdoctor_cpu_meter_hook.py", site / "_dfdoctor_cpu_meter_hook.pth"
    mod.write_text(HOOK)
    pth.write_text("import _dfdoctor_cpu_meter_hook\n")
    try:
        env = dict(os.environ, DFDOCTOR_CPU_METER=str(out.resolve()))
        return subprocess.run([str(REPO / ".venv" / "bin" / "pytest"), "-q", *args], cwd=REPO, env=env).returncode
    finally:
        pth.unlink(missing_ok=True)
        mod.unlink(missing_ok=True)


def _test_of(current: str) -> str:
    return current.rsplit(" (", 1)[0]  # "path::name (call)" -> "path::name"


def _own_cpu_by_kind(log: Path) -> tuple[collections.Counter, collections.Counter]:
    """Each exited process's own CPU (not its children's), by kind: a dfdoctor command, a process that imported
    torch, an xdist worker, or another Python of the venv."""
    import ast
    cpu: collections.Counter = collections.Counter()
    count: collections.Counter = collections.Counter()
    for line in (log.read_text().splitlines() if log.exists() else []):
        event, _pid, argv, _current, own, extra = ast.literal_eval(line)
        if event != "exit":
            continue
        words = [a.rsplit("/", 1)[-1] for a in argv]
        if words[1:2] == ["dfdoctor"] or words[1:3] == ["-m", "dfdoctor"]:
            kind = "dfdoctor " + " ".join(words[2:3] if words[1] == "dfdoctor" else words[3:4])
        elif "exec(eval(sys.stdin.readline()))" in " ".join(argv):
            kind = "xdist worker"
        elif "torch" in extra.split(","):
            kind = "other, imported torch"
        else:
            kind = "other"
        cpu[kind] += own
        count[kind] += 1
    return cpu, count


def summary(out: Path) -> None:
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import work_unit

    tests = [json.loads(line) for f in sorted(out.glob("tests-*.jsonl")) for line in f.read_text().splitlines()]
    starts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    own_cpu: collections.Counter = collections.Counter()
    kinds: collections.Counter = collections.Counter()
    log = out / "starts.log"
    for line in (log.read_text().splitlines() if log.exists() else []):
        import ast
        event, _pid, argv, current, cpu, extra = ast.literal_eval(line)
        test = _test_of(current) or "(no test)"
        if event == "start":
            prog = " ".join(argv[1:3]) if argv[0].endswith(("python", "python3")) else argv[0]
            kind = "dfdoctor" if "dfdoctor" in prog.rsplit("/", 1)[-1] or "-m dfdoctor" in prog else "python"
            starts[test][kind] += 1
            kinds[kind] += 1
        else:
            own_cpu[test] += cpu
            for flag in filter(None, extra.split(",")):
                starts[test][flag] += 1
                kinds[flag] += 1
    by_kind, by_kind_n = _own_cpu_by_kind(log)
    units: collections.Counter = collections.Counter()
    unit_wall: collections.Counter = collections.Counter()
    for t in tests:
        units[work_unit(t["nodeid"])] += t["cpu_s"]
        unit_wall[work_unit(t["nodeid"])] += t["wall_s"]
    total = sum(t["cpu_s"] for t in tests)
    print(f"{len(tests)} tests, {total:.1f} CPU-s in the tests' cgroups, {sum(t['wall_s'] for t in tests):.1f} "
          f"wall-s summed; Python starts: {dict(kinds)}")
    print("\nown CPU-s of the venv's Python processes that exited normally, by kind (count, mean):")
    for kind, cpu in by_kind.most_common(12):
        print(f"  {cpu:8.1f} {by_kind_n[kind]:5d} {cpu / by_kind_n[kind]:5.2f}  {kind}")
    print("\nunits by CPU-s (wall-s):")
    for unit, cpu in units.most_common(25):
        print(f"  {cpu:8.1f} ({unit_wall[unit]:7.1f})  {unit}")
    print("\ntests by CPU-s: cpu wall self  starts")
    for t in sorted(tests, key=lambda t: -t["cpu_s"])[:40]:
        print(f"  {t['cpu_s']:7.1f} {t['wall_s']:7.1f} {t['self_cpu_s']:5.1f}  {dict(starts.get(t['nodeid'], {}))}"
              f"  {t['nodeid'][:110]}")


if __name__ == "__main__":
    usage = __doc__.split("\n\n")[1]
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(usage)
        sys.exit(0)
    if len(sys.argv) < 2 or sys.argv[1].startswith("-") and sys.argv[1] != "--summary" or \
            sys.argv[1] == "--summary" and len(sys.argv) != 3:
        # an option where OUT_DIR goes was once taken for it (`--help`): a full run of the suite in a folder "--help"
        print(f"usage:\n{usage}", file=sys.stderr)
        sys.exit(2)
    if sys.argv[1] == "--summary":
        summary(Path(sys.argv[2]))
        sys.exit(0)
    # SIGTERM (a process group ended from outside) removes the venv's hook as Ctrl-C does: `run`'s finally
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    rc = run(Path(sys.argv[1]), sys.argv[2:])
    summary(Path(sys.argv[1]))
    sys.exit(rc)
