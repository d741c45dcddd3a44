"""compile.race: the static scan, the real reproduction in this interpreter, and a deadlock's verdict."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from dfdoctor import causes, probe_server
from dfdoctor.context import Context
from dfdoctor.model import Status
from dfdoctor.probe import ProbeOutcome, run_probe

from dfdoctor.checks import compile_race as cr
from dfdoctor.checks import compile_scan

REPO = Path(__file__).resolve().parent.parent
GPU_PROBE_JSON = REPO / "bench" / "results" / "trainer_gpu_1_probe_flex_noguard.json"

THREADED = textwrap.dedent("""
    import threading
    import torch

    def step(x):
        return (x @ x).sum()

    fns = [torch.compile(step) for _ in range(4)]
    threads = [threading.Thread(target=lambda f=f: f(torch.randn(4, 4, requires_grad=True)).backward())
               for f in fns]
""")
FLAGGED = THREADED + "\nimport torch._functorch.config as c\nc.force_non_lazy_backward_lowering = True\n"
GUARDED = textwrap.dedent("""
    import threading
    import torch
    from dfdoctor.guard import compile_guard

    def worker(i):
        fn = torch.compile(lambda x: (x @ x).sum() * i)
        for n in (4, 6):
            x = torch.randn(n, n, requires_grad=True)
            with compile_guard(x.shape):
                fn(x).backward()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
""")


def ctx_for(tmp_path: Path, argv: list[str], **options) -> Context:
    """A Context for a job launched as `python ARGV` in tmp_path with compile.race settings."""
    return Context(command=[sys.executable, *argv], cwd=tmp_path, python=sys.executable, timeout=150,
                   config={"checks": {"compile.race": options}})


def results(ctx: Context) -> list:
    return list(cr.compile_race.func(ctx))


def test_static_scan_finds_threads_compiles_and_flag_seen_not_proven(tmp_path: Path) -> None:
    """The scanner reads the AST: compiles, thread starts; the config flag is seen, never taken for a guard."""
    (tmp_path / "a.py").write_text(THREADED)
    (tmp_path / "b.py").write_text(FLAGGED)
    a = compile_scan.scan([tmp_path / "a.py"])
    b = compile_scan.scan([tmp_path / "b.py"])
    assert a.compiles and a.threads and a.compiles_in_threads and not a.guarded and not a.seen
    assert b.compiles_in_threads and not b.guarded
    assert any("b.py:13 force_non_lazy_backward_lowering" in s and "seen, not proven" in s for s in b.seen)


def test_unguarded_script_warns_without_reproducing(tmp_path: Path) -> None:
    """reproduce = never: only the static warning, with where it looked."""
    (tmp_path / "train.py").write_text(THREADED)
    rs = results(ctx_for(tmp_path, ["train.py"], reproduce="never"))
    assert [r.status for r in rs] == [Status.WARN]
    assert rs[0].cause == causes.FX_TRACE_RACE and any("torch.compile" in e for e in rs[0].evidence)


def test_guarded_script_and_plain_script_are_quiet(tmp_path: Path) -> None:
    """A script with the proven guard gets no warning, one with the flag alone does; one that never compiles
    in threads is not reproduced at all."""
    (tmp_path / "g.py").write_text(GUARDED)
    (tmp_path / "f.py").write_text(FLAGGED)
    (tmp_path / "p.py").write_text("print('hello')\n")
    assert [r.status for r in results(ctx_for(tmp_path, ["g.py"], reproduce="never"))] == [Status.SKIP]
    flagged = results(ctx_for(tmp_path, ["f.py"], reproduce="never"))
    assert [r.status for r in flagged] == [Status.WARN]
    assert any("seen, not proven" in e for e in flagged[0].evidence)
    rs = results(ctx_for(tmp_path, ["p.py"]))
    assert [r.status for r in rs] == [Status.SKIP] and "not run" in rs[0].summary


def test_bundled_trainer_is_seen_through_dash_m() -> None:
    """`python -m dfdoctor.trainer` is scanned as a package: guarded by default, unguarded with the switch."""
    ctx = Context(command=[sys.executable, "-m", "dfdoctor.trainer", "--no-compile-guard"], cwd=REPO, python=sys.executable,
                  config={"checks": {"compile.race": {"reproduce": "never"}}})
    rs = results(ctx)
    assert rs[0].status == Status.WARN and any("--no-compile-guard" in e for e in rs[0].evidence)
    assert "bundled trainer" in rs[0].fix  # the launched program is the trainer: its switch is the fix
    ctx.command = [sys.executable, "-m", "dfdoctor.trainer"]
    assert [r.status for r in results(ctx)] == [Status.SKIP]


def test_probe_helpers_name_both_fx_crashes() -> None:
    """The probe tells the nested-trace error from the CURRENT_PATCHER sibling."""
    sys.path.insert(0, str(REPO / "checks" / "probes"))
    import compile_race_probe as probe

    assert probe.classify_error("RuntimeError: Detected that you are using FX to symbolically trace "
                                "a dynamo-optimized function.") == "fx-nested-trace"
    assert probe.classify_error("AssertionError: CURRENT_PATCHER is None in finally block") == "fx-current-patcher"
    assert probe.classify_error("ValueError: nope") == "other"


def test_deadlock_verdict_from_real_h200_answer() -> None:
    """The H200 probe answer (hang + stacks) becomes a compile-deadlock failure with the cycle as evidence."""
    payload = json.loads(GPU_PROBE_JSON.read_text())
    hung = ProbeOutcome(["x"], 3, "", "", 93.0, payload=payload)
    guarded = ProbeOutcome(["x"], 0, "", "", 40.0, payload={"outcome": "ok", "torch": payload["torch"],
                                                            "errors": [], "kinds": []})
    found = compile_scan.Scan(threaded=["t.py:3 thread runs worker()"], unguarded=["worker() (t.py:3) ..."])
    r = cr._verdict([hung], [guarded], unguarded=True, runs=1, found=found, fix="FIX")
    assert r.status == Status.FAIL and r.cause == causes.COMPILE_DEADLOCK and r.fix == "FIX"
    headline = next(e for e in r.evidence if "deadlocked" in e)
    assert headline.startswith("4 threads are deadlocked in torch.compile: compile_lock held while waiting")
    assert any("waits for compile_lock in compile_fx_backward" in e for e in r.evidence)  # per-thread detail
    assert r.data["deadlocks"] == 1 and r.data["guard_failures"] == 0
    assert "compile_fx_backward" in r.details  # the stacks themselves travel with the finding


def test_guard_that_fails_is_reported_as_such() -> None:
    """A race with the guard on is a failure of the guard, said so."""
    raced = {"outcome": "race", "torch": "t", "first_error_s": 1.0, "kinds": ["fx-nested-trace"],
             "errors": [{"thread": 1, "t": 1.0, "error": "RuntimeError: Detected that you are using FX"}]}
    r = cr._verdict([ProbeOutcome(["x"], 0, "", "", 3.0, payload=raced)],
                    [ProbeOutcome(["x"], 0, "", "", 3.0, payload=raced)], unguarded=False, runs=1,
                    found=compile_scan.Scan(), fix="")
    assert r.status == Status.FAIL and "did NOT hold" in r.summary


RACED = {"outcome": "race", "torch": "t", "first_error_s": 1.5, "kinds": ["fx-nested-trace"],
         "errors": [{"thread": 1, "t": 1.5, "error": "RuntimeError: Detected that you are using FX"}]}
HELD = {"outcome": "ok", "torch": "t", "errors": [], "kinds": []}


def _run(payload: dict) -> ProbeOutcome:
    return ProbeOutcome(["x"], 0, "", "", 2.0, payload=payload)


def test_a_series_ended_at_its_first_reproduction_is_conclusive_and_says_so() -> None:
    """Round 18: the runs without the guard stop at the first that reproduces the race; such an answer (1 run
    of 3, then all 3 guarded runs) is worth reusing, and its words say the series stopped there. A series cut
    short without a reproduction, or a guarded series cut short, is not."""
    assert cr._conclusive([_run(RACED)], [_run(HELD)] * 3, runs=3)
    assert cr._conclusive([_run(HELD), _run(RACED)], [_run(HELD)] * 3, runs=3)
    assert not cr._conclusive([_run(HELD)], [_run(HELD)] * 3, runs=3)
    assert not cr._conclusive([_run(RACED)], [_run(HELD)] * 2, runs=3)
    found = compile_scan.Scan(threaded=["t.py:3 thread runs worker()"], unguarded=["worker() (t.py:3) ..."])
    r = cr._verdict([_run(RACED)], [_run(HELD)] * 3, unguarded=True, runs=3, found=found, fix="FIX")
    assert r.status == Status.FAIL and r.cause == causes.FX_TRACE_RACE
    assert "in 1/1 runs, first failure after 1.5 s (the runs without the guard stop at the first that " \
           "reproduces it); dfdoctor.guard held in 3/3 runs" in r.summary, r.summary
    guarded = cr._verdict([_run(RACED)], [_run(HELD)] * 3, unguarded=False, runs=3, found=compile_scan.Scan(),
                          fix="")
    assert guarded.status == Status.OK and "1/1 runs" in guarded.summary


@pytest.mark.slow
def test_reproduces_in_this_interpreter_and_the_guard_holds(tmp_path: Path, own_cache_dir: Path) -> None:
    """Real torch.compile on CPU: the unguarded script's race reproduces, and that series stops at the first run
    that reproduces it; the guard holds in every one of its runs. The runs are served as `dfdoctor check` serves
    them (doctor/engine.py): forks of one interpreter that imported torch once (a probe asked before it is ready
    runs fresh), not three interpreters each importing torch and dynamo (~2 CPU-s each)."""
    (tmp_path / "train.py").write_text(THREADED)
    t = time.monotonic()
    ctx = ctx_for(tmp_path, ["train.py"], runs=2)
    with probe_server.serving(ctx, wanted=True):
        rs = results(ctx)
    final = rs[-1]
    assert final.status == Status.FAIL and final.cause == causes.FX_TRACE_RACE, final
    assert final.data["reproduced"] == 1 and final.data["guard_failures"] == 0 and final.data["guard_runs"] == 2
    assert "stop at the first that reproduces it" in final.summary, final.summary
    assert "Detected that you are using FX" in " ".join(final.evidence)
    assert time.monotonic() - t < 140
    # Asked again with the same interpreter, torch and settings, a conclusive answer is reused and says so.
    stored = list((own_cache_dir / cr.CACHE_KIND).glob("*.json"))
    conclusive = final.data["stalled"] == 0 and final.data["guard_runs"] == 2
    assert len(stored) == (1 if conclusive else 0), (final.data, stored)
    again = results(ctx_for(tmp_path, ["train.py"], runs=2))[-1] if conclusive else None
    if again is not None:
        assert again.data["reused_from"] and "reused" in again.summary, again
        same = ("reproduced", "guard_runs", "guard_failures", "median_first_error_s")
        assert {k: again.data[k] for k in same} == {k: final.data[k] for k in same}
        assert again.status == final.status and again.cause == final.cause and again.evidence == final.evidence


@pytest.mark.slow
def test_stalled_probe_is_dumped_and_leaves_nothing(tmp_path: Path) -> None:
    """A trial past its deadline answers with every thread's stack and exits; no process is left."""
    marker = f"race-test-{os.getpid()}-{time.monotonic_ns()}"
    ctx = Context(python=sys.executable, cwd=tmp_path, env={**os.environ, "RACE_TEST_MARK": marker})
    out = run_probe(ctx, "compile_race_probe.py", ["--backend", "inductor", "--threads", "2", "--deadline", "1"],
                    timeout=60)
    assert out.payload and out.payload["outcome"] == "hang", (out.returncode, out.stderr[-1000:])
    assert "compile_race_probe.py" in out.payload["stacks"] and out.returncode == 3
    kind, found = cr._outcome(out)
    assert kind == "stalled" and found is None  # still compiling, no lock cycle
    left = [p for p in psutil.process_iter(["pid"]) if _env(p).get("RACE_TEST_MARK") == marker]
    assert left == []


def _env(p: psutil.Process) -> dict:
    try:
        return p.environ()
    except (psutil.Error, OSError):
        return {}


@pytest.mark.slow
def test_probe_proves_the_shipped_guard_file_where_dfdoctor_cannot_be_imported(tmp_path: Path) -> None:
    """An interpreter whose `import dfdoctor` fails gets dfdoctor.guard's own file beside the probe; the answer
    says which one was proven, and that it is byte for byte the one dfdoctor has."""
    shadow = tmp_path / "shadow" / "dfdoctor"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('dfdoctor is not installed here')\n")
    ctx = Context(command=[sys.executable, "x.py"], cwd=tmp_path, python=sys.executable, timeout=60,
                  env={**os.environ, "PYTHONPATH": str(shadow.parent)})
    # as compile.race runs it locally: the path of dfdoctor's own guard module (on a --target: the shipped copy)
    out = run_probe(ctx, "compile_race_probe.py", ["--guard", "exclusive-compile", "--guard-file",
                                                   str(cr.GUARD_FILE), "--deadline", "40"], timeout=60)
    assert out.payload and out.payload["outcome"] == "ok", (out.stderr[-2000:], out.payload)
    gm = cr._guard_module([out])
    assert gm["how"] == "file" and gm["same_as_dfdoctor"] and gm["proven_torch"], gm


def test_guard_file_travels_beside_the_probe_to_a_target() -> None:
    """On a --target the probe gets dfdoctor.guard's own file as dfdoctor_guard.py (its --guard-file there)."""
    import base64
    import zlib

    from dfdoctor.targets import remote_probe

    data = remote_probe.request(REPO / "checks" / "probes" / "compile_race_probe.py", ["--guard-file", cr.SHIPPED_GUARD],
                                timeout=10, env={}, cwd=None, python=None,
                                extra={cr.SHIPPED_GUARD: cr.GUARD_FILE.read_text()})
    req = json.loads(zlib.decompress(base64.b64decode(data.splitlines()[1])))
    assert req["files"][cr.SHIPPED_GUARD] == cr.GUARD_FILE.read_text()
    assert "_probe_support.py" in req["files"] and req["script"] == "compile_race_probe.py"
