"""compile.race: do several threads that torch.compile at once crash or deadlock in this interpreter?

Two parts. Statically (checks/compile_scan.py), it reads (never imports) the launched code and its own
modules, finds the threads that run compiled code and whether each applies the proven guard
(`dfdoctor.guard.compile_guard`, unconditionally on its path); a reading alone only warns. Then, in the
training interpreter, it runs the reproduction (checks/probes/compile_race_probe.py: barrier-started threads,
forward + backward, recompiles) up to a few times without a guard (stopping at the first run that reproduces
it: a reproduced race is the observed failure; more runs would only measure its rate) and as many with
`dfdoctor.guard` itself, every one of them (that the guard held in each is the proof)
(imported there as the user's code would, or shipped as its one file where that interpreter has no dfdoctor),
and says how often and how fast the race came and whether the guard held. A reproduced race in code that
compiles in threads without the proven guard fails. A reproduction that stops progressing is ended at its deadline; its threads' stacks
are classified (`dfdoctor.diagnose.stackclass`), so a deadlock is named, not just timed out.

Settings ([tool.dfdoctor.checks."compile.race"]): reproduce = "auto" | "always" | "never" (auto: only when the
script compiles in threads), runs (3), threads (4), backend ("race" | "inductor" | "flex"), device ("cpu"),
deadline (20 s a run), cache_days (7: a conclusive reproduction is reused for the same interpreter, torch install
and settings, and the finding says so; 0 always reruns).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Iterator, Optional

import dfdoctor.guard as guard_module
from dfdoctor import cache, causes, check, fail, ok, skip, warn
from dfdoctor.checks import compile_scan
from dfdoctor.diagnose import guardfix
from dfdoctor.command import run_command
from dfdoctor.launchline.commandline import spec_for
from dfdoctor.model import STATIC
from dfdoctor.probe import ProbeOutcome, run_probe, unreached

CHECK_ID = "compile.race"
DISABLING_ARGS = ("--no-compile-guard",)
CACHE_KIND = "compile-race"
GUARD_FILE = Path(guard_module.__file__)
SHIPPED_GUARD = "dfdoctor_guard.py"
REPRODUCED = ("race", "deadlock")  # the outcomes of a run that reproduced the failure
# What every run of the race backend imports before its threads start (dynamo, the backend's parts): a probe server
# imports them once, where it may, so that each run does not import them again (1.1-1.3 s each on 2 cores). Not for
# inductor or flex: dynamo's import reads inductor's config, and their runs must set TORCHINDUCTOR_FORCE_DISABLE_CACHES
# before it is read (a warm cache would skip the very compiles that race).
PRELOAD = ("torch._dynamo", "torch._dynamo.backends.common", "torch.fx.experimental.proxy_tensor")


@check(CHECK_ID, title="Concurrent torch.compile in threads: reproduce the race, prove the guard",
       phases=("pre",), timeout=150, imports_torch=True,
       doing="reproduces the torch.compile thread race without and with the guard (its answer is kept a week)")
def compile_race(ctx) -> Iterator:
    """Read the code for threads that run compiled code unguarded, then reproduce the race without and with
    the guard in the training interpreter."""
    spec = spec_for(ctx)
    trainer = guardfix.is_trainer(ctx.command)
    found = compile_scan.scan(source_files(spec, ctx.cwd, ctx.python if ctx.target.runs_here else None))
    if trainer:
        _read_trainer(spec.script_args or ctx.command, found)
    fix = guardfix.fix_for(trainer, _entry_names(found))
    unguarded = found.compiles_in_threads and not found.guarded
    if unguarded:
        how = "could not link the threads to the compiled code" if found.unlinked else \
            "threads run compiled code without the proven guard"
        yield warn(f"the launched code calls torch.compile and starts threads ({how}): concurrent compiles crash "
                   f"with an FX tracing error (CPU) or deadlock silently (GPU)", causes.FX_TRACE_RACE,
                   evidence=tuple(_static_evidence(found)), fix=fix, basis=STATIC)
    mode = str(ctx.option(CHECK_ID, "reproduce", "auto"))
    if mode == "never" or (mode == "auto" and not found.compiles_in_threads):
        if not unguarded:
            yield skip("no torch.compile in several threads found in the launched code; reproduction not run"
                       if mode == "auto" else "reproduction disabled (reproduce = \"never\")",
                       data={"files_scanned": found.files})
        return
    yield from reproduce(ctx, unguarded, found, fix)


def _read_trainer(args: list[str], found: compile_scan.Scan) -> None:
    """The bundled trainer applies dfdoctor.guard by default; its arguments say whether this launch turns it off."""
    choice = "exclusive-compile"
    for i, a in enumerate(args):
        if a in DISABLING_ARGS:
            choice = "off"
        elif a.startswith("--compile-guard="):
            choice = a.split("=", 1)[1]
        elif a == "--compile-guard" and i + 1 < len(args):
            choice = args[i + 1]
    entry = "the bundled trainer's drafter threads (dfdoctor.trainer)"
    found.threaded = found.threaded or [entry]
    found.unlinked = False
    if choice == "exclusive-compile":
        found.proven, found.unguarded = [f"{entry}: with dfdoctor.guard.compile_guard(bucket) (its default)"], []
    else:
        found.proven = []
        found.unguarded = [f"{entry}: guard turned off (--compile-guard {choice})" if choice != "off"
                           else f"{entry}: guard turned off ({next((a for a in args if a in DISABLING_ARGS), '--compile-guard off')})"]


def _entry_names(found: compile_scan.Scan) -> list[str]:
    """The thread functions the fix should name (`worker()` of 'worker() (train.py:3) runs ...')."""
    return [u.split(" ", 1)[0] for u in found.unguarded if u.split(" ", 1)[0].endswith("()")][:3]


def _static_evidence(found: compile_scan.Scan) -> list[str]:
    """What the reading found, unguarded entries first, then what was seen but is not the proven guard."""
    seen = [f"seen, not proven: {s}" if "seen, not proven" not in s else s for s in found.seen]
    return (found.unguarded[:3] + found.compiles[:3] + found.threads[:3] + seen[:4]) or ["(nothing found)"]


def source_files(spec, cwd: Path, python: Optional[str] = None) -> list[Path]:
    """The launched script and the modules of its own that it imports (transitively), or the launched
    package's files and theirs (found under --cwd, else where the training interpreter would import it from)."""
    if spec.script and spec.script.is_file():
        return compile_scan.own_modules(spec.script, [spec.script.parent])
    if not spec.module:
        return []
    root_dir = spec.cwd or cwd
    root = root_dir / Path(*spec.module.split("."))
    top = root_dir / spec.module.split(".")[0]
    if not top.is_dir() and not root.with_suffix(".py").is_file() and python:
        found = _installed_location(python, spec.module, root_dir)
        if found:
            top, root = found, found.with_suffix("")
            root_dir = found.parent if found.is_file() else found.parents[len(spec.module.split(".")) - 1]
    files: list[Path] = []
    if top.is_dir():
        files = sorted(top.rglob("*.py"))
    elif root.with_suffix(".py").is_file():
        files = [root.with_suffix(".py")]
    out: list[Path] = []
    for f in files[:compile_scan.MAX_FILES]:
        out += [m for m in compile_scan.own_modules(f, [root_dir]) if m not in out]
        if len(out) >= compile_scan.MAX_FILES:
            break
    return out[:compile_scan.MAX_FILES]


def _installed_location(python: str, module: str, cwd: Path) -> Optional[Path]:
    """Where `python -m module` would load `module` from (its package folder, or its file). Finding it imports
    the parent packages, as `-m` itself would, in a subprocess of the training interpreter; never the module."""
    code = ("import importlib.util,sys\ns=importlib.util.find_spec(sys.argv[1])\n"
            "print((s.submodule_search_locations or [s.origin or ''])[0] if s else '')")
    out = run_command([python, "-c", code, module], timeout=10, cwd=cwd)
    where = out.stdout.strip() if out.returncode == 0 else ""
    return Path(where) if where else None


def reproduce(ctx, unguarded: bool, found: compile_scan.Scan, fix: str) -> Iterator:
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
        yield _verdict(bare, guarded, unguarded, runs, found, fix, reused_from=stored_at)
        return
    budget_end = time.monotonic() + float(ctx.timeout or 150) - 3.0
    preload = PRELOAD if base[1] == "race" else ()
    bare = _series(ctx, base + ["--guard", "none"], runs, deadline, budget_end, preload, until_reproduced=True)
    unreachable = unreached(ctx, bare[0]) if bare else None
    if unreachable:
        yield unreachable
        return
    if bare and bare[0].payload is None and "No module named 'torch'" in bare[0].stderr:
        yield skip(f"torch is not installed in the training interpreter {ctx.python}; nothing to reproduce")
        return
    local = ctx.target.runs_here
    # the guard as the user's code imports it there; where it cannot, this very file, shipped beside the probe
    with_guard = base + ["--guard", "exclusive-compile", "--guard-file", str(GUARD_FILE) if local else SHIPPED_GUARD]
    guarded = _series(ctx, with_guard, runs, deadline, budget_end, preload, files={SHIPPED_GUARD: GUARD_FILE})
    if key and _conclusive(bare, guarded, runs):
        cache.store(CACHE_KIND, key, [[_storable(o) for o in bare], [_storable(o) for o in guarded]])
    yield _verdict(bare, guarded, unguarded, runs, found, fix)


def _cache_key(ctx, base: list[str], runs: int) -> Optional[dict]:
    """What the reproduction's answer depends on; None when the interpreter cannot say (then nothing is reused)."""
    out = run_probe(ctx, "torch_fingerprint_probe.py", timeout=15.0)
    if not out.payload or not out.payload.get("torch_origin"):
        return None
    probe = Path(__file__).parent / "probes" / "compile_race_probe.py"
    return {"target": str(ctx.target), "interpreter": out.payload,
            "argv": base, "runs": runs, "probe": cache.key_of(probe.read_text()),
            "guard": cache.key_of(GUARD_FILE.read_text())}


def _conclusive(bare: list[ProbeOutcome], guarded: list[ProbeOutcome], runs: int) -> bool:
    """Worth reusing: the series without the guard ran all its runs or ended at its first reproduction, the
    guarded one ran all its runs, and every run ended in race, deadlock or ok (not broken, not slow)."""
    if not _series_done(bare, runs) or len(guarded) != runs:
        return False
    return all(_outcome(o)[0] in ("race", "deadlock", "ok") for o in bare + guarded)


def _series_done(bare: list[ProbeOutcome], runs: int) -> bool:
    """The unguarded series ended as it should: all its runs, or fewer whose last reproduced the failure."""
    return len(bare) == runs or (0 < len(bare) < runs and _outcome(bare[-1])[0] in REPRODUCED)


def _storable(o: ProbeOutcome) -> dict:
    """A probe outcome as cache JSON, its output trimmed to what the verdict quotes."""
    d = dataclasses.asdict(o)
    d["stdout"], d["stderr"] = o.stdout[-4000:], o.stderr[-20000:]
    return d


def _series(ctx, argv: list[str], runs: int, deadline: float, budget_end: float, preload: tuple[str, ...] = (),
            files: Optional[dict[str, Path]] = None, until_reproduced: bool = False) -> list[ProbeOutcome]:
    """Up to `runs` probe runs, stopping when the check's own time would run out, and (`until_reproduced`, the
    series without the guard) after the first run that reproduced the race or deadlock: that run is the observed
    failure, and each further one cost the demo's launch 1.8 s (a deadlock on a GPU: its whole deadline)."""
    out: list[ProbeOutcome] = []
    for _ in range(runs):
        left = budget_end - time.monotonic()
        if left < deadline / 2 + 5:
            break
        out.append(run_probe(ctx, "compile_race_probe.py", argv, timeout=min(deadline + 15.0, left), files=files,
                             preload=preload))
        if until_reproduced and _outcome(out[-1])[0] in REPRODUCED:
            break
    return out


def _outcome(o: ProbeOutcome) -> tuple[str, Optional[tuple[str, str]]]:
    """race | deadlock | stalled | ok | broken, with the stack classification of a deadlock."""
    # start-up: the stack reading (and statistics, below) are a reproduction's alone, which a few checks run;
    # every `check` and `launch` imported them with this module (0.004 CPU-s of each, round 19)
    from dfdoctor.diagnose.stackclass import classify
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
             found: compile_scan.Scan, fix: str, reused_from: Optional[float] = None):
    """One result from both series (reused_from: when a cached reproduction was made)."""
    import statistics  # start-up: see _outcome

    from dfdoctor.diagnose.stackclass import find_cycle, summarize
    b = [_outcome(o) for o in bare]
    g = [_outcome(o) for o in guarded]
    torch_v = next((o.payload.get("torch") for o in bare + guarded if o.payload), "?")
    hits = [i for i, (kind, _) in enumerate(b) if kind in REPRODUCED]
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
            "stalled": stalled, "guard_module": _guard_module(guarded)}
    if reused_from is not None:
        data["reused_from"] = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(reused_from))
    evidence = tuple(e for e in (_evidence(o) for o in bare + guarded) if e)[:4]
    details = next((e["traceback"] for o in bare + guarded for e in (o.payload or {}).get("errors") or []
                    if e.get("traceback")), "")
    if deadlocks:
        hung = next(o for (kind, _), o in zip(b + g, bare + guarded) if kind == "deadlock")
        dump = (hung.payload or {}).get("stacks") or hung.stderr
        cycle = find_cycle(dump)
        evidence = (deadlocks[0][1],) + tuple(cycle.detail() if cycle else ()) + evidence
        details = summarize(dump)
    broken = [o for (kind, _), o in zip(b + g, bare + guarded) if kind == "broken"]
    if not bare or len(broken) == len(bare) + len(guarded):
        first = broken[0] if broken else None
        return skip("the reproduction could not run in this interpreter"
                    + (f" (exit {first.returncode})" if first else " (no time left)"),
                    details=first.stderr[-2000:] if first else "", data=data)
    how = _how(hits, len(bare), firsts, data["median_first_error_s"])
    held = f"dfdoctor.guard held in {len(guarded) - len(g_fail)}/{len(guarded)} runs"
    gm = data["guard_module"]
    if gm and not gm.get("proven_torch"):
        held += (f" (torch {torch_v} is not on the guard's proven list: it refuses to run until "
                 f"{guard_module.UNPROVEN_ENV}=1, which this result justifies)" if not g_fail else "")
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
                    fix="serialise whole training steps behind one lock (slower: warm steps no longer overlap) "
                        "and report the stacks above to dfdoctor")
    if not hits:
        return ok(f"concurrent torch.compile did not race in {len(bare)} runs with torch {torch_v}; {held}{slow}",
                  data=data)
    summary = f"concurrent torch.compile {name} in this interpreter (torch {torch_v}) in {how}; {held}{slow}"
    if unguarded:
        return fail(summary + "; the launched code runs compiled code in threads without the proven guard", cause,
                    evidence=evidence[:8] + tuple(_static_evidence(found)[:5]), data=data, fix=fix, details=details)
    if not found.guarded:  # reproduced with the guard forced on; the launched code itself was not read as threaded
        return ok(summary, data=data, evidence=evidence)
    return ok(summary + "; the launched code applies it: " + found.proven[0], data=data,
              evidence=tuple(found.proven[:3]) + tuple(f"seen, not proven: {s}" if "seen, not proven" not in s
                                                       else s for s in found.seen[:2]) + evidence[:2])


def _how(hits: list[int], made: int, firsts: list[float], median: Optional[float]) -> str:
    """How often it reproduced ("1/1 runs"), how soon, and, where the series ended at its one reproduction, that
    it stops there (so that "1/1" is not read as one run asked for, nor as a rate)."""
    when = (f", first failure after {median} s" if len(firsts) == 1 else
            f", first failure after a median {median} s" if firsts else "")
    stopped = (" (the runs without the guard stop at the first that reproduces it)"
               if len(hits) == 1 and hits[0] == made - 1 else "")
    return f"{len(hits)}/{made} runs{when}{stopped}"


def _guard_module(guarded: list[ProbeOutcome]) -> Optional[dict]:
    """How the probe got dfdoctor.guard (imported there, or the shipped file) and whether it is this one."""
    gm = next((o.payload.get("guard_module") for o in guarded if o.payload and o.payload.get("guard_module")), None)
    if gm:
        import hashlib  # here: a check that proves no guard does not load OpenSSL for it
        gm = dict(gm, same_as_dfdoctor=gm.get("sha256") == hashlib.sha256(GUARD_FILE.read_bytes()).hexdigest())
    return gm


def _evidence(o: ProbeOutcome) -> str:
    """One line a user can grep for: the first error a run hit."""
    errs = (o.payload or {}).get("errors") or []
    return f"thread {errs[0]['thread']} after {errs[0]['t']} s: {errs[0]['error'][:160]}" if errs else ""
