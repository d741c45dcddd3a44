"""A job that exited 0 without doing any work is not ok: `did-nothing`, with the line it printed.

Public examples guard themselves: finding too few GPUs, no data or the wrong setup, every rank prints why and
calls `sys.exit()`, so the job (and torchrun over it) ends with status 0. Four observed facts together make the
verdict, so that a fast healthy job (the bundled trainer's tiny preset, `make demo`, a two-step smoke run) is never
called idle:

- it ended with status 0 within QUICK_S;
- one of its last lines says why it stopped (REASON: "unable to", "not enough", "exiting", ...);
- it printed no progress: no line came back with new numbers (the reason itself, and one line per rank, aside);
- it wrote no file under its working folder or a folder its command names, since it started (looked at where the
  run folder is this machine's; on a --target that fact is said to be unobserved).
"""

from __future__ import annotations

import ast
import glob
import os
import shutil
import re
import time
from pathlib import Path
from typing import Optional

from dfdoctor import causes
from dfdoctor.agent.loop_lines import shape_of
from dfdoctor.model import Verdict
from dfdoctor.run.record import RunRecord
from dfdoctor.lazy_re import compile_later

QUICK_S = 300.0  # a job that stopped this soon, saying why, did not train
OUTPUT_MAX = 64 << 10  # more output than this is work, whatever it says
SAID_MIN = 12  # a repeated piece shorter than this is a rule or a pattern, not ranks' sentences run together
LAST_LINES = 3  # the reason is among the last lines of a stream: a job says why just before it exits
WALK_MAX = 20000  # entries looked at under the folders, at most (a huge data folder is not walked whole)
WALK_BUDGET_S = 1.0
SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".dfdoctor", ".venv", "venv", "node_modules", ".mypy_cache",
             ".pytest_cache", "site-packages"}
REASON = compile_later(
    r"\b(?:unable to|could ?n[o']t|cannot|can't|fail(?:ed|s)? to|not (?:enough|sufficient|found|available|"
    r"supported|set|detected)|insufficient|no (?:usable |available |cuda |)(?:gpus?|cuda|devices?|accelerators?)\b|"
    r"(?:requires?|needs?) (?:at least )?\d+|exiting|aborting|skipping|nothing to do|giving up)", re.I)
_LOG_PREFIX = compile_later(r"^(?:\[(?:rank|default)\d*\]:|\S*\d+:\s)")  # torchrun --tee's "[rank0]:", "0: "


def did_nothing(run: RunRecord) -> Optional[Verdict]:
    """The `did-nothing` verdict of a job that ended with status 0, or None when it did some work."""
    ex = run.exit or {}
    wall = ex.get("wall_s")
    if ex.get("exit_code") != 0 or wall is None or wall > QUICK_S or run.output_bytes() > OUTPUT_MAX:
        return None
    streams = {name: _lines(run.stream(name)) for name in ("stdout", "stderr")}
    reason = next((line for name in ("stdout", "stderr") for line in reversed(streams[name][-LAST_LINES:])
                   if REASON.search(line) and not _is_warning(line)), None)
    if reason is None:
        return None
    every = streams["stdout"] + streams["stderr"]
    if _progress(every, reason):
        return None
    written = _files_written(run)
    if written:
        return None
    times = sum(1 for line in every if line == reason)
    ranks = _nproc(run.spawned.get("argv") or [])
    said = f"every rank printed it ({times} times)" if ranks and times >= ranks > 1 else \
        (f"printed {times} times" if times > 1 else "printed once")
    where = _printed_at(run, reason)
    evidence = [f"exit status 0 after {wall} s", f"the last word: {reason!r} ({said})" + (f", {where}" if where else ""),
                "no progress: no line came back with new numbers",
                "nothing written: " + ("no file under its folders changed since it started" if written is not None
                                       else "not looked at (the job ran on another machine)")]
    gpu = re.search(r"gpu|cuda|device|accelerator", reason, re.I)
    fix = ("Give the job what its line asks for, or run it where that is: " +
           ("it counts the GPUs torch sees, and `dfdoctor check --only cuda.init` shows what torch sees here; run it "
            "on a machine with that many GPUs, or with fewer ranks if the project allows it"
            if gpu else "read the line and the code that prints it") +
           (f" ({where.removeprefix('printed at ')})" if where else "") + ".")
    who = f"{where.removeprefix('printed at ')} printed why" if where else "it printed why"
    return Verdict("failed", causes.DID_NOTHING,
                   f"The job exited with status 0 after {wall} s without doing any work; {who}: {reason!r}.",
                   fix, evidence)


def spawned_none(run: RunRecord) -> Optional[Verdict]:
    """`did-nothing` for a job that starts one process per GPU (`mp.spawn(main, nprocs=world_size)` with
    `world_size = torch.cuda.device_count()`, PyTorch's DDP tutorial) where no GPU is: it started no process,
    printed nothing and exited 0. The count comes from the script; that this machine has no GPU is observed (the
    job's CUDA_VISIBLE_DEVICES hides every one, or nvidia-smi lists none, or no /dev/nvidia device exists)."""
    ex = run.exit or {}
    if ex.get("exit_code") != 0 or run.is_remote or run.output_bytes() or _gpus_visible(run) != 0:
        return None
    spawned = run.spawned or {}
    cwd = Path(spawned.get("cwd") or ".")
    script = next((cwd / a for a in spawned.get("argv") or [] if a.endswith(".py") and (cwd / a).is_file()), None)
    try:
        tree = ast.parse(script.read_text(errors="replace")) if script else None
    except (SyntaxError, ValueError, OSError):
        tree = None
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)) if tree is not None else ():
        if getattr(call.func, "attr", getattr(call.func, "id", "")) not in ("spawn", "start_processes"):
            continue
        nprocs = next((k.value for k in call.keywords if k.arg == "nprocs"), call.args[2] if len(call.args) > 2
                      else None)
        counted = _device_count_at(tree, nprocs)
        if counted is None:
            continue
        where = f"{script.name}:{call.lineno}"
        return Verdict("failed", causes.DID_NOTHING,
                       f"The job exited with status 0 after {ex.get('wall_s')} s without doing any work: it starts one "
                       f"process per GPU at {where} (nprocs from torch.cuda.device_count() at {script.name}:"
                       f"{counted}), and this machine has no GPU, so it started none.",
                       f"Run it where torch sees GPUs (one process each), or make {script.name}:{counted} start a "
                       "fixed number of processes with the gloo backend and the CPU device on a machine without "
                       "GPUs (not tried).",
                       [f"exit status 0 after {ex.get('wall_s')} s", "no output at all",
                        f"{where}: {ast.unparse(call)[:200]}", "GPUs visible to the job: none"])
    return None


def _device_count_at(tree: ast.AST, expr: Optional[ast.AST]) -> Optional[int]:
    """The line of `torch.cuda.device_count()` that `expr` is (directly, or the one assignment of its name)."""
    if isinstance(expr, ast.Call) and getattr(expr.func, "attr", "") == "device_count":
        return expr.lineno
    if isinstance(expr, ast.Name):
        sets = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and
                any(isinstance(t, ast.Name) and t.id == expr.id for t in n.targets)]
        if len(sets) == 1 and isinstance(sets[0].value, ast.Call) and \
                getattr(sets[0].value.func, "attr", "") == "device_count":
            return sets[0].lineno
    return None


def _gpus_visible(run: RunRecord) -> Optional[int]:
    """0 where the job could see no GPU (observed), None where that is not known."""
    env = (run.spawned or {}).get("env") or {}
    if env.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return 0
    if shutil.which("nvidia-smi"):
        return None  # a GPU driver is here: the count is torch's to say, not this reading's
    return 0 if not glob.glob("/dev/nvidia[0-9]*") else None


def _lines(text: str) -> list[str]:
    """The stream's lines that the job printed itself: torchrun's prefixes taken off, blank lines dropped, and a
    line that is one line said several times over taken apart (`_said_together`)."""
    out = []
    for line in text.splitlines():
        s = _LOG_PREFIX.sub("", line).strip()
        if s and not line[:1].isspace():
            out.extend(_said_together(s))
    return out


def _said_together(line: str) -> list[str]:
    """`line` as the lines it holds when it is one line written k >= 2 times end to end, else [line]. An unbuffered
    `print` (python -u, PYTHONUNBUFFERED=1, as many images set) writes its text and its newline apart, so ranks
    printing the same sentence at the same moment leave "whywhy" and then the newlines. A short repeat ("====",
    "abab") is a line of its own."""
    period = (line + line).find(line, 1)  # the shortest p with line == line[:p] * (len(line) // p)
    if period < len(line) and period >= SAID_MIN:
        return [line[:period]] * (len(line) // period)
    return [line]


def _is_warning(line: str) -> bool:
    """An import-time or library warning (`FutureWarning: ...`, torchrun's `W1205 ...` lines), not the job's word."""
    return "Warning:" in line or bool(re.match(r"^[WI]\d{4} ", line))


def _progress(lines: list[str], reason: str) -> bool:
    """Whether some line came back with new numbers (a step counter, a loss): the shape repeated with at least two
    different texts. The reason's shape is not progress, nor a line that only differs by its rank."""
    texts: dict[bytes, set[str]] = {}
    skip = shape_of(reason.encode("utf-8", "replace"))
    for line in lines:
        if _is_warning(line) or re.search(r"\brank\b", line, re.I):
            continue
        shape = shape_of(line.encode("utf-8", "replace"))
        if shape is not None and shape != skip:
            texts.setdefault(shape, set()).add(line)
    return any(len(t) >= 2 for t in texts.values())


def _files_written(run: RunRecord) -> Optional[list[str]]:
    """Files changed while the job ran, under its folder and the folders its command names (the run folder and the
    log aside; what dfdoctor wrote after the end, a report, is later than the end); None when they are not on this
    machine."""
    spawned = run.spawned or {}
    if run.is_remote or not spawned.get("cwd"):
        return None
    cwd = Path(spawned["cwd"])
    # from the spawn on (mtimes are exact to the nanosecond here): a file the user wrote a second before the launch
    # (the job's own script, copied in) is not the job's work; the end keeps a second for writes still in flight
    start, end = float(spawned.get("t") or 0) - 0.05, float((run.exit or {}).get("t") or time.time()) + 1.0
    named = [cwd / a.split("=", 1)[-1] for a in spawned.get("argv") or [] if a]
    roots = [cwd] + [p for p in named if p.is_dir() and cwd not in p.resolve().parents and p.resolve() != cwd]
    ignore = {str(run.dir), str(spawned.get("log") or "")}
    found: list[str] = []
    seen = 0
    deadline = time.monotonic() + WALK_BUDGET_S
    for root in dict.fromkeys(roots):
        for here, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and os.path.join(here, d) not in ignore]
            seen += len(files) + len(dirs)
            for f in files:
                path = os.path.join(here, f)
                try:
                    if path not in ignore and start <= os.stat(path).st_mtime <= end:
                        found.append(path)
                except OSError:
                    continue
            if found:
                return found
            if seen > WALK_MAX or time.monotonic() > deadline:
                return ["(too many files to look at all)"]  # unknown counts as written: never call work idle
    return found


def _nproc(argv: list[str]) -> int:
    """torchrun's --nproc_per_node (or --nproc-per-node) as a number; 0 when not given as one."""
    for i, a in enumerate(argv):
        m = re.fullmatch(r"--nproc[_-]per[_-]node(?:=(\S+))?", a)
        if m:
            value = m.group(1) or (argv[i + 1] if i + 1 < len(argv) else "")
            return int(value) if value.isdigit() else 0
    return 0


def _printed_at(run: RunRecord, reason: str) -> str:
    """'printed at train.py:14' where a string of the job's script is the fixed part of the line it printed."""
    spawned = run.spawned or {}
    cwd = Path(spawned.get("cwd") or ".")
    script = next((cwd / a for a in spawned.get("argv") or [] if a.endswith(".py") and (cwd / a).is_file()), None)
    if script is None or run.is_remote:
        return ""
    try:
        tree = ast.parse(script.read_text(errors="replace"))
    except (SyntaxError, ValueError, OSError):
        return ""
    for node in ast.walk(tree):
        parts = [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else \
            [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)] \
            if isinstance(node, ast.JoinedStr) else []
        fixed = [p.strip() for p in parts if len(p.strip()) >= 8]
        if fixed and all(p in reason for p in fixed):
            return f"printed at {script.name}:{node.lineno}"
    return ""
