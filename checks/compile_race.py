"""compile.race: do several threads that torch.compile at once crash or deadlock in this interpreter?

Two parts. Statically, it reads (never imports) the launched script or package and warns when it calls
`torch.compile` and starts threads without a compile guard. Then, in the training interpreter, it runs the
reproduction (checks/probes/compile_race_probe.py: barrier-started threads, forward + backward, recompiles)
a few times without a guard and as many with the guard, and says how often and how fast the race came and
whether the guard held. A reproduction that stops progressing is ended at its deadline; its threads' stacks
are classified (`dfdoctor.diagnose.stackclass`), so a deadlock is named, not just timed out.

Settings ([tool.dfdoctor.checks."compile.race"]): reproduce = "auto" | "always" | "never" (auto: only when the
script compiles in threads), runs (3), threads (4), backend ("race" | "inductor" | "flex"), device ("cpu"),
deadline (20 s a run), cache_days (7: a conclusive reproduction is reused for the same interpreter, torch install
and settings, and the finding says so; 0 always reruns).
"""

from __future__ import annotations

import ast
import dataclasses
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from dfdoctor import cache, causes, check, fail, ok, skip, warn
from dfdoctor.command import run_command
from dfdoctor.diagnose.stackclass import COMPILE_GUARD_FIX, classify, summarize
from dfdoctor.launchline.commandline import spec_for
from dfdoctor.probe import ProbeOutcome, run_probe, unreached

CHECK_ID = "compile.race"
MAX_FILES = 200
MAX_FILE_BYTES = 1_000_000
GUARD_MARKERS = ("force_non_lazy_backward_lowering", "apply_compile_guard")
DISABLING_ARGS = ("--no-compile-guard", "--compile-guard=off")
FIX = COMPILE_GUARD_FIX
CACHE_KIND = "compile-race"


@dataclass
class Scan:
    """Where the launched code compiles, starts threads and guards, as file:line strings."""

    files: int = 0
    compiles: list[str] = field(default_factory=list)
    threads: list[str] = field(default_factory=list)
    guards: list[str] = field(default_factory=list)


@check(CHECK_ID, title="Concurrent torch.compile in threads: reproduce the race, prove the guard",
       phases=("pre",), timeout=150)
def compile_race(ctx) -> Iterator:
    """Read the script for unguarded threaded compiles, then reproduce the race with and without the guard."""
    spec = spec_for(ctx)
    scan = scan_sources(source_files(spec, ctx.cwd, ctx.python if ctx.target == "local" else None))
    disabled = [a for a in spec.script_args if a in DISABLING_ARGS]
    unguarded = bool(scan.compiles and scan.threads and (disabled or not scan.guards))
    if unguarded:
        yield warn(f"the launched code calls torch.compile and starts threads, with no compile guard"
                   f"{' (disabled by ' + disabled[0] + ')' if disabled else ''}: concurrent compiles crash "
                   f"with an FX tracing error (CPU) or deadlock silently (GPU)", causes.FX_TRACE_RACE,
                   evidence=tuple(scan.compiles[:3] + scan.threads[:3] + disabled), fix=FIX)
    mode = str(ctx.option(CHECK_ID, "reproduce", "auto"))
    if mode == "never" or (mode == "auto" and not (scan.compiles and scan.threads)):
        if not unguarded:
            yield skip("no torch.compile in several threads found in the launched code; reproduction not run"
                       if mode == "auto" else "reproduction disabled (reproduce = \"never\")",
                       data={"files_scanned": scan.files})
        return
    yield from reproduce(ctx, unguarded)


def source_files(spec, cwd: Path, python: Optional[str] = None) -> list[Path]:
    """The launched script and its sibling modules, or every file of the launched package (found under --cwd,
    else where the training interpreter would import it from)."""
    files: list[Path] = []
    if spec.script and spec.script.is_file():
        files.append(spec.script)
        folder = spec.script.parent
        for name in _imported_names(spec.script):
            for cand in (folder / f"{name}.py", folder / name):
                files.extend([cand] if cand.is_file() else sorted(cand.rglob("*.py")) if cand.is_dir() else [])
    elif spec.module:
        root = (spec.cwd or cwd) / Path(*spec.module.split("."))
        top = (spec.cwd or cwd) / spec.module.split(".")[0]
        if not top.is_dir() and not root.with_suffix(".py").is_file() and python:
            found = _installed_location(python, spec.module, spec.cwd or cwd)
            top, root = (found, found.with_suffix("")) if found else (top, root)
        if top.is_dir():
            files.extend(sorted(top.rglob("*.py")))
        elif root.with_suffix(".py").is_file():
            files.append(root.with_suffix(".py"))
    return list(dict.fromkeys(files))[:MAX_FILES]


def _installed_location(python: str, module: str, cwd: Path) -> Optional[Path]:
    """Where `python -m module` would load `module` from (its package folder, or its file). Finding it imports
    the parent packages, as `-m` itself would, in a subprocess of the training interpreter; never the module."""
    code = ("import importlib.util,sys\ns=importlib.util.find_spec(sys.argv[1])\n"
            "print((s.submodule_search_locations or [s.origin or ''])[0] if s else '')")
    out = run_command([python, "-c", code, module], timeout=10, cwd=cwd)
    where = out.stdout.strip() if out.returncode == 0 else ""
    return Path(where) if where else None


def _imported_names(path: Path) -> list[str]:
    """Top-level names a script imports (`import a.b` gives a)."""
    tree = _parse(path)
    names: list[str] = []
    for node in ast.walk(tree) if tree else ():
        if isinstance(node, ast.Import):
            names += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module.split(".")[0])
    return names


def _parse(path: Path) -> Optional[ast.AST]:
    """The AST of a Python file, or None when it is unreadable, too big or not Python."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        return ast.parse(path.read_text(errors="replace"), str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def scan_sources(files: list[Path]) -> Scan:
    """Find torch.compile calls or decorators, thread starts and guard markers in the files."""
    scan = Scan()
    for path in files:
        tree = _parse(path)
        if tree is None:
            continue
        scan.files += 1
        for node in ast.walk(tree):
            where = f"{path.name}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Attribute) and node.attr == "compile" and _is_name(node.value, "torch"):
                scan.compiles.append(f"{where} torch.compile")
            elif isinstance(node, ast.Call) and _callee(node) in ("Thread", "ThreadPoolExecutor"):
                scan.threads.append(f"{where} {_callee(node)}(...)")
            elif isinstance(node, (ast.Attribute, ast.Name)) and _ident(node) in GUARD_MARKERS:
                scan.guards.append(f"{where} {_ident(node)}")
    return scan


def _is_name(node: ast.AST, name: str) -> bool:
    """Whether node is the bare name `name`."""
    return isinstance(node, ast.Name) and node.id == name


def _ident(node: ast.AST) -> str:
    """The identifier a Name or Attribute node ends in."""
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def _callee(call: ast.Call) -> str:
    """The called function's last identifier (`threading.Thread(...)` gives Thread)."""
    return _ident(call.func)


def reproduce(ctx, unguarded: bool) -> Iterator:
    """Run the harness without and with the guard in the training interpreter; report both.

    The reproduction exercises the interpreter's torch, not the user's code, so a conclusive one is reused for
    the same interpreter, torch install, settings and probe for `cache_days` (default 7; 0 always reruns).
    """
    runs = int(ctx.option(CHECK_ID, "runs", 3))
    deadline = float(ctx.option(CHECK_ID, "deadline", 20.0))
    base = ["--backend", str(ctx.option(CHECK_ID, "backend", "race")),
            "--threads", str(ctx.option(CHECK_ID, "threads", 4)),
            "--device", str(ctx.option(CHECK_ID, "device", "cpu")), "--deadline", str(deadline)]
    max_age_s = float(ctx.option(CHECK_ID, "cache_days", 7)) * 86400
    key = _cache_key(ctx, base, runs) if max_age_s > 0 else None
    hit = cache.lookup(CACHE_KIND, key, max_age_s) if key else None
    if hit:
        (bare, guarded), stored_at = [[ProbeOutcome(**o) for o in series] for series in hit[0]], hit[1]
        yield _verdict(bare, guarded, unguarded, runs, reused_from=stored_at)
        return
    budget_end = time.monotonic() + float(ctx.timeout or 150) - 3.0
    bare = _series(ctx, base + ["--guard", "none"], runs, deadline, budget_end)
    unreachable = unreached(ctx, bare[0]) if bare else None
    if unreachable:
        yield unreachable
        return
    if bare and bare[0].payload is None and "No module named 'torch'" in bare[0].stderr:
        yield skip(f"torch is not installed in the training interpreter {ctx.python}; nothing to reproduce")
        return
    guarded = _series(ctx, base + ["--guard", "exclusive-compile"], runs, deadline, budget_end)
    if key and _conclusive(bare, guarded, runs):
        cache.store(CACHE_KIND, key, [[_storable(o) for o in bare], [_storable(o) for o in guarded]])
    yield _verdict(bare, guarded, unguarded, runs)


def _cache_key(ctx, base: list[str], runs: int) -> Optional[dict]:
    """What the reproduction's answer depends on; None when the interpreter cannot say (then nothing is reused)."""
    out = run_probe(ctx, "torch_fingerprint_probe.py", timeout=15.0)
    if not out.payload or not out.payload.get("torch_origin"):
        return None
    probe = Path(__file__).parent / "probes" / "compile_race_probe.py"
    return {"target": str(getattr(ctx, "target", "local") or "local"), "interpreter": out.payload,
            "argv": base, "runs": runs, "probe": cache.key_of(probe.read_text())}


def _conclusive(bare: list[ProbeOutcome], guarded: list[ProbeOutcome], runs: int) -> bool:
    """Worth reusing: every run happened and ended in race, deadlock or ok (not broken, not slow)."""
    if len(bare) != runs or len(guarded) != runs:
        return False
    return all(_outcome(o)[0] in ("race", "deadlock", "ok") for o in bare + guarded)


def _storable(o: ProbeOutcome) -> dict:
    """A probe outcome as cache JSON, its output trimmed to what the verdict quotes."""
    d = dataclasses.asdict(o)
    d["stdout"], d["stderr"] = o.stdout[-4000:], o.stderr[-20000:]
    return d


def _series(ctx, argv: list[str], runs: int, deadline: float, budget_end: float) -> list[ProbeOutcome]:
    """Up to `runs` probe runs, stopping when the check's own time would run out."""
    out: list[ProbeOutcome] = []
    for _ in range(runs):
        left = budget_end - time.monotonic()
        if left < deadline / 2 + 5:
            break
        out.append(run_probe(ctx, "compile_race_probe.py", argv, timeout=min(deadline + 15.0, left)))
    return out


def _outcome(o: ProbeOutcome) -> tuple[str, Optional[tuple[str, str]]]:
    """race | deadlock | stalled | ok | broken, with the stack classification of a deadlock."""
    p = o.payload
    if p is None:
        if o.timed_out:  # the probe's own watchdog never answered: use the SIGUSR1 dump run_probe asked for
            found = classify(o.stderr)
            return ("deadlock" if found else "stalled"), found
        return "broken", None
    if p.get("outcome") == "hang":
        found = classify(p.get("stacks", ""))
        return ("deadlock" if found else "stalled"), found
    return {"race": "race", "ok": "ok"}.get(p.get("outcome"), "broken"), None


def _verdict(bare: list[ProbeOutcome], guarded: list[ProbeOutcome], unguarded: bool, runs: int,
             reused_from: Optional[float] = None):
    """One result from both series (reused_from: when a cached reproduction was made)."""
    b = [_outcome(o) for o in bare]
    g = [_outcome(o) for o in guarded]
    torch_v = next((o.payload.get("torch") for o in bare + guarded if o.payload), "?")
    hits = [i for i, (kind, _) in enumerate(b) if kind in ("race", "deadlock")]
    firsts = [bare[i].payload["first_error_s"] for i in hits
              if bare[i].payload and bare[i].payload.get("first_error_s") is not None]
    deadlocks = [c for kind, c in b + g if kind == "deadlock"]
    stalled = sum(kind == "stalled" for kind, _ in b + g)
    g_fail = [kind for kind, _ in g if kind in ("race", "deadlock")]
    kinds = sorted({k for o in bare + guarded if o.payload for k in o.payload.get("kinds", [])})
    data = {"torch": torch_v, "runs": len(bare), "reproduced": len(hits), "kinds": kinds,
            "median_first_error_s": round(statistics.median(firsts), 2) if firsts else None,
            "median_run_s": round(statistics.median([o.duration_s for o in bare]), 2) if bare else None,
            "guard_runs": len(guarded), "guard_failures": len(g_fail), "deadlocks": len(deadlocks),
            "stalled": stalled}
    if reused_from is not None:
        data["reused_from"] = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(reused_from))
    evidence = tuple(e for e in (_evidence(o) for o in bare + guarded) if e)[:4]
    details = next((e["traceback"] for o in bare + guarded for e in (o.payload or {}).get("errors") or []
                    if e.get("traceback")), "")
    if deadlocks:
        evidence = (deadlocks[0][1],) + evidence
        hung = next(o for (kind, _), o in zip(b + g, bare + guarded) if kind == "deadlock")
        details = summarize((hung.payload or {}).get("stacks") or hung.stderr)
    broken = [o for (kind, _), o in zip(b + g, bare + guarded) if kind == "broken"]
    if not bare or len(broken) == len(bare) + len(guarded):
        first = broken[0] if broken else None
        return skip("the reproduction could not run in this interpreter"
                    + (f" (exit {first.returncode})" if first else " (no time left)"),
                    details=first.stderr[-2000:] if first else "", data=data)
    how = (f"{len(hits)}/{len(bare)} runs" + (f", first failure after a median {data['median_first_error_s']} s"
                                             if firsts else ""))
    held = f"the compile guard held in {len(guarded) - len(g_fail)}/{len(guarded)} runs"
    slow = f"; {stalled} run(s) were still compiling at the deadline (no lock cycle in their stacks)" if stalled else ""
    if reused_from is not None:  # say so: a reused answer must never pass for a fresh one
        slow += (f"; reproduction of {data['reused_from'][:16].replace('T', ' ')} reused (same interpreter, torch "
                 "and settings; cache_days = 0 reruns it)")
    cause = causes.COMPILE_DEADLOCK if deadlocks else causes.FX_TRACE_RACE
    name = "deadlocked" if deadlocks else "raced"
    if g_fail:
        return fail(f"concurrent torch.compile {name} in this interpreter (torch {torch_v}) in {how}, and the "
                    f"compile guard did NOT hold ({len(g_fail)}/{len(guarded)} failed){slow}", cause,
                    evidence=evidence, data=data, details=details,
                    fix="serialise whole training steps behind one lock (trainer --compile-guard step-lock) "
                        "and report the stacks above")
    if not hits:
        return ok(f"concurrent torch.compile did not race in {len(bare)} runs with torch {torch_v}; {held}{slow}",
                  data=data)
    summary = f"concurrent torch.compile {name} in this interpreter (torch {torch_v}) in {how}; {held}{slow}"
    if unguarded:
        return fail(summary + "; the launched code has no guard", cause, evidence=evidence, data=data, fix=FIX,
                    details=details)
    return ok(summary + "; the launched code is guarded", data=data, evidence=evidence)


def _evidence(o: ProbeOutcome) -> str:
    """One line a user can grep for: the first error a run hit."""
    errs = (o.payload or {}).get("errors") or []
    return f"thread {errs[0]['thread']} after {errs[0]['t']} s: {errs[0]['error'][:160]}" if errs else ""
