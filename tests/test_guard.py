"""dfdoctor.guard, the public compile guard: light to import, never hangs (nested guards, steps that wait on
each other), gates torch's compiling (the lazy backward under compile_lock, the entry check waiting out another
thread's compile), per-thread settings, the version check, and the guard holding on real torch.compile in
user-shaped scripts (4 threads each with its own model; a producer/consumer pipeline)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import dfdoctor.guard as guard

REPO = Path(__file__).resolve().parent.parent


def test_import_dfdoctor_and_the_guard_does_not_import_torch() -> None:
    """`import dfdoctor` and `import dfdoctor.guard` stay light: torch is imported only when a step runs."""
    code = "import sys, dfdoctor, dfdoctor.guard; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_guard_file_uses_only_the_standard_library_and_torch() -> None:
    """The file is shipped alone to interpreters without dfdoctor: it may import nothing else."""
    import ast

    tree = ast.parse(Path(guard.__file__).read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert names <= set(sys.stdlib_module_names) | {"torch", "__future__"}, names


HANDOFF_AND_NESTING = textwrap.dedent('''
    import queue, sys, threading
    from dfdoctor.guard import compile_guard

    handoff = queue.Queue(maxsize=1)
    done = []

    @compile_guard
    def inner(x):
        return x + 1

    @compile_guard
    def outer(x):                          # a guarded function calling another
        return inner(x) * 2

    def producer():
        for n in range(4):
            with compile_guard(("batch", n)):   # a new key every step: each a first step
                handoff.put(outer(n))           # waits for the consumer, inside the step
        handoff.put(None)

    def consumer():
        while True:
            with compile_guard("consume"):
                x = handoff.get()               # waits for the producer, inside the step
                if x is None:
                    return
                with compile_guard(("nested", x)):  # a guard inside a guard, on a new key
                    done.append(outer(x))

    threads = [threading.Thread(target=f, daemon=True) for f in (producer, consumer)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    print("DONE", done, "STUCK", [t.is_alive() for t in threads])
    sys.exit(1 if any(t.is_alive() for t in threads) else 0)
''')


def test_guarded_steps_may_nest_and_wait_on_each_other() -> None:
    """Item 7 and 8 of issue 22 without compiling: guards nested three deep, and a producer and a consumer
    that hand data through a bounded queue inside guarded steps, finish (the round-4 gate deadlocked both)."""
    out = subprocess.run([sys.executable, "-c", HANDOFF_AND_NESTING], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-500:] + out.stderr[-2000:]
    assert "DONE [6, 10, 14, 18]" in out.stdout, out.stdout


def test_install_gates_the_lazy_backward_compile_once_per_process() -> None:
    """The lazy backward's compile runs under dynamo's compile_lock (as every forward compile does); other
    compile triggers are left as they are, and installing twice wraps once."""
    import torch._dynamo.callback as dcallback
    from torch._dynamo.convert_frame import compile_lock

    assert guard.install() == {"lazy_backward": True, "entry_check": True}
    wrapped = dcallback.callback_handler.install_callbacks
    assert guard.install() and dcallback.callback_handler.install_callbacks is wrapped
    shipped = importlib.util.spec_from_file_location("dfdoctor_guard_copy", guard.__file__)
    copy = importlib.util.module_from_spec(shipped)  # the file compile.race ships alone to an interpreter
    shipped.loader.exec_module(copy)
    assert copy.install() == {"lazy_backward": True, "entry_check": True}
    assert dcallback.callback_handler.install_callbacks is wrapped
    held = {}
    for trigger in (dcallback.CallbackTrigger.LAZY_BACKWARD, dcallback.CallbackTrigger.DYNAMO):
        with dcallback.callback_handler.install_callbacks(trigger, "test"):
            held[trigger.name] = compile_lock._is_owned()
    assert held == {"LAZY_BACKWARD": True, "DYNAMO": False} and not compile_lock._is_owned()


def test_entry_check_waits_out_another_threads_compile_and_keeps_torchs_answer_otherwise(monkeypatch, capfd) -> None:
    """The FX check on entry to a compiled function: while another thread's compile traces (it holds
    compile_lock, the FX flag is up), it waits for that compile to end, saying who it waits for, and then
    answers False; a trace of the caller's own (no compile running) still answers True, as torch does."""
    import torch.fx._symbolic_trace as st
    from torch._dynamo.convert_frame import compile_lock

    guard.install()
    monkeypatch.setattr(guard, "WAIT_REPORT_S", 0.2)
    tracing, release, answers = threading.Event(), threading.Event(), []

    def compiling_thread() -> None:
        with compile_lock:
            st._is_fx_tracing_flag = True
            tracing.set()
            release.wait(30)
            st._is_fx_tracing_flag = False

    def entering_thread() -> None:
        answers.append(("entered", st.is_fx_symbolic_tracing(), release.is_set()))

    compiler = threading.Thread(target=compiling_thread, name="drafter-compiling", daemon=True)
    compiler.start()
    try:
        assert tracing.wait(30)
        enterer = threading.Thread(target=entering_thread, name="drafter-entering", daemon=True)
        enterer.start()
        enterer.join(0.7)
        assert enterer.is_alive(), "the entry check did not wait for the other thread's compile"
        release.set()
        enterer.join(30)
        compiler.join(30)
        assert answers == [("entered", False, True)]
        said = capfd.readouterr().err
        assert "thread 'drafter-entering' has waited" in said and "thread 'drafter-compiling' compiles" in said
        st._is_fx_tracing_flag = True  # a trace of this thread's own, no compile running: torch's answer
        assert st.is_fx_symbolic_tracing() is True
    finally:
        release.set()
        st._is_fx_tracing_flag = False
    assert st.is_fx_symbolic_tracing() is False


def test_setup_thread_sets_the_flag_and_copies_shared_config_per_thread() -> None:
    """torch keeps compile config per thread: the worker gets the flag and the main thread's shared values."""
    import torch._dynamo.config as dconfig
    import torch._functorch.config as fconfig

    before = dconfig.cache_size_limit
    dconfig.cache_size_limit = before + 7
    seen = {}
    try:
        guard.share_config()

        def worker() -> None:
            seen["plain"] = dconfig.cache_size_limit
            with guard.compile_guard("k"):
                seen["flag"] = getattr(fconfig, "force_non_lazy_backward_lowering", True)
                seen["limit"] = dconfig.cache_size_limit

        t = threading.Thread(target=worker)
        t.start()
        t.join(30)
    finally:
        dconfig.cache_size_limit = before
        guard._shared_config.clear()
    assert seen["flag"] is True and seen["limit"] == before + 7
    assert seen["plain"] == before  # why share_config exists: a new thread does not see the main thread's value


def test_unproven_torch_is_refused_with_a_clear_message(monkeypatch) -> None:
    """Another torch: UnprovenTorch naming the proven versions and how to prove this one; the env var allows it."""
    monkeypatch.setattr(guard, "torch_version", lambda: (2, 12))
    monkeypatch.delenv(guard.UNPROVEN_ENV, raising=False)
    with pytest.raises(guard.UnprovenTorch) as err:
        guard.check_torch()
    assert "proven on torch 2.11, 2.13," in str(err.value) and "dfdoctor check --only compile.race" in str(err.value)
    assert guard.check_torch(allow_unproven=True) == (2, 12)
    monkeypatch.setenv(guard.UNPROVEN_ENV, "1")
    assert guard.check_torch() == (2, 12)


def test_decorator_applies_the_thread_settings_and_returns_the_result() -> None:
    """`@compile_guard` on a step function: the thread gets its settings on the first call; arguments and
    the return value pass through unchanged."""
    import torch._functorch.config as fconfig

    @guard.compile_guard
    def step(x, *, scale):
        flag = getattr(fconfig, "force_non_lazy_backward_lowering", True)
        return x * scale, getattr(guard._local, "ready", False), flag

    seen = []
    t = threading.Thread(target=lambda: seen.append(step(3, scale=2)))
    t.start()
    t.join(30)
    assert seen == [(6, True, True)]
    assert step.__name__ == "step"


USER_SCRIPT = textwrap.dedent('''
    import sys, threading, torch, torch._dynamo
    sys.path.insert(0, {probes!r})
    from compile_race_probe import race_backend    # wide race window, as compile.race uses
    GUARD = sys.argv[1] == "guard"
    RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 1   # runs one after another, each compiling afresh
    if GUARD:
        from dfdoctor.guard import compile_guard
    errors = []

    def worker(i):
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        fn = torch.compile(model, backend=race_backend(), dynamic=False)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        try:
            for step in range(6):
                x = torch.randn(4 + 2 * (step % 2), 8)
                if GUARD:
                    with compile_guard(x.shape):
                        fn(x).sum().backward(); opt.step(); opt.zero_grad()
                else:
                    fn(x).sum().backward(); opt.step(); opt.zero_grad()
        except Exception as exc:
            errors.append(f"{{type(exc).__name__}}: {{exc}}"[:200])

    for run in range(RUNS):
        torch._dynamo.reset()   # every run's models compile afresh, as in a fresh interpreter
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        [t.start() for t in threads]
        [t.join() for t in threads]
    print("ERRORS", len(errors), errors[:1])
    sys.exit(1 if errors else 0)
''')


@pytest.mark.slow
def test_user_shaped_script_races_unguarded_and_completes_with_the_guard(tmp_path: Path, torch_forks_server) -> None:
    """4 threads, each compiling its own model, forward + backward + optimizer: unguarded the FX race hits;
    with the two lines the fix shows, every run completes."""
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT.format(probes=str(REPO / "checks" / "probes")))

    def run(mode: str, runs: int = 1) -> subprocess.CompletedProcess:
        # a fork of one interpreter that imported torch and dynamo once (support/torch_forks.py)
        return torch_forks_server([script, mode, str(runs)], timeout=120 * runs, cwd=tmp_path)

    bare = _until_it_races([lambda: run("none")] * 2,
                           lambda r: r.returncode == 1 and "symbolically trace" in r.stdout + r.stderr)
    assert bare["raced"], [r.stdout[-300:] for r in bare["runs"]]
    # both guarded runs in one fork, each after torch._dynamo.reset() (every compile afresh, as
    # bench/guard_pipeline.py's runs)
    r = run("guard", 2)
    assert r.returncode == 0 and "ERRORS 0" in r.stdout, r.stdout[-500:] + r.stderr[-2000:]


def _until_it_races(runs: list, raced) -> dict:
    """The unguarded runs, one after another, up to the first that races (as compile.race's series without the
    guard stops): the claim "at least one of N races" is the same, and a run after the first race proves nothing
    more (each is a fresh interpreter compiling afresh, ~2.5-3.5 CPU-s). Measured (round 19): the user-shaped
    script and user_threads.py --backend race-unlocked each raced in 5 of 5 fresh runs without the guard."""
    done = []
    for run in runs:
        done.append(run())
        if raced(done[-1]):
            return {"raced": True, "runs": done}
    return {"raced": False, "runs": done}


def _json_answer(proc: subprocess.CompletedProcess) -> dict:
    """The last JSON line a bench script printed (its outcome), or what went wrong."""
    import json

    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {"outcome": "broken", "stderr": proc.stderr[-2000:]}


# How many guarded pipelines (round 24, measured on the 2-core machine at load 7-14; each run ~1.2 CPU-s): what
# breaks the guard here fails in the first run. Without a guard, 6 of 6 processes raced in their first run (5 of 6
# fresh runs in round 19); round 4's gate (git show 094f480^:doctor/guard.py) hung in its first run, 3 of 3. A
# guard missing one of its three parts (the entry check, the lazy-backward lock, the per-thread
# force_non_lazy_backward_lowering) completed 20 of 20, 2 of 2 each: any one part holds this CPU scenario, so more
# runs would not catch those. 5 runs miss a guard that does nothing with odds under (1/6)^5; the 20-run
# reliability figure docs/guard.md gives is bench/guard_pipeline_runs.py's, not this test's.
GUARDED_PIPELINES = 5


@pytest.mark.slow
def test_pipeline_handing_tensors_between_guarded_steps_completes_5_of_5(torch_forks_server) -> None:
    """The DFlash pipeline shape (bench/guard_pipeline.py): a producer's compiled encoder hands tensors
    through a bounded queue to two consumers training their own compiled models, every put and get inside a
    guarded step, nested `@compile_guard` functions, a new shape (a recompile) every two batches. Unguarded
    it races; guarded, 5 pipelines in a row complete (each run compiles afresh). The round-4 gate hung
    here; the script's own deadline turns a hang into a failure, not a stuck suite."""
    script = [REPO / "bench" / "guard_pipeline.py"]
    fork = torch_forks_server  # both series in forks of one interpreter that imported torch and dynamo once
    # up to 5 pipelines, stopping at the first failure: 5 of 6 fresh runs raced when measured
    bare = _json_answer(fork(script + ["--no-guard", "--runs", "5", "--deadline", "60"], timeout=120))
    assert bare["outcome"] in ("race", "error"), bare  # the scenario does race without a guard
    guarded = fork(script + ["--runs", str(GUARDED_PIPELINES), "--deadline", "120"], timeout=180)
    answer = _json_answer(guarded)
    assert answer["outcome"] == "ok" and answer["completed"] == GUARDED_PIPELINES, (answer, guarded.stderr[-3000:])


@pytest.mark.slow
def test_installed_gate_covers_lazy_backward_compiles_of_threads_without_the_guard(torch_forks_server) -> None:
    """`install()` alone, no per-thread settings: every backward compiles lazily at `.backward()`, traced
    without any lock (as aot_eager does). Without it the threads' traces collide; with it every run completes."""
    script = [REPO / "bench" / "user_threads.py", "--backend", "race-unlocked", "--deadline", "90"]
    fork = torch_forks_server  # every run a fork of one interpreter that imported torch and dynamo once
    bare = _until_it_races([lambda: _json_answer(fork(script, timeout=150))] * 2,
                           lambda b: b["outcome"] in ("race", "error"))
    assert bare["raced"], bare["runs"]
    # both guarded runs in one fork (--runs 2: each after torch._dynamo.reset(), every compile afresh; its
    # deadline is the two runs'), as in test_user_shaped_script_races_unguarded_and_completes_with_the_guard
    out = fork([*script[:-1], "180", "--install-only", "--runs", "2"], timeout=300)
    answer = _json_answer(out)
    assert answer["outcome"] == "ok" and answer["completed"] == 2, (answer, out.stderr[-3000:])
