"""dfdoctor.guard, the public compile guard: light to import, gate semantics, per-thread settings, the version
check, and the guard holding on real torch.compile in a user-shaped script (4 threads, each its own model)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
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


def test_first_step_per_key_runs_alone_warm_steps_overlap() -> None:
    """A thread's first step on a key never overlaps any other step; warm steps do overlap."""
    active, peak_first, peak_warm = [0], [0], [0]
    lock = threading.Lock()
    barrier = threading.Barrier(3)

    def worker() -> None:
        barrier.wait()
        for step in range(6):
            first = step < 2
            with guard.compile_guard(("shape", step % 2)):
                with lock:
                    active[0] += 1
                    peak = peak_first if first else peak_warm
                    peak[0] = max(peak[0], active[0])
                time.sleep(0.02)
                with lock:
                    active[0] -= 1

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert peak_first[0] == 1 and peak_warm[0] > 1


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
    assert "2.11, 2.13" in str(err.value) and "dfdoctor check --only compile.race" in str(err.value)
    assert guard.check_torch(allow_unproven=True) == (2, 12)
    monkeypatch.setenv(guard.UNPROVEN_ENV, "1")
    assert guard.check_torch() == (2, 12)


def test_decorator_keys_on_argument_shapes() -> None:
    """`@compile_guard` keys each call on its arguments' shapes and dtypes: a counter does not make a new key."""

    class T:
        def __init__(self, *shape):
            self.shape, self.dtype = shape, "float32"

    calls = []

    @guard.compile_guard
    def step(x, i):
        calls.append(sorted(guard._local.seen))
        return i

    t = threading.Thread(target=lambda: [step(T(2, 3), i) for i in range(3)] + [step(T(4, 3), 9)])
    t.start()
    t.join(30)
    assert len(calls) == 4 and len(calls[2]) == 1 and len(calls[3]) == 2


USER_SCRIPT = textwrap.dedent('''
    import sys, threading, torch
    sys.path.insert(0, {probes!r})
    from compile_race_probe import race_backend    # wide race window, as compile.race uses
    GUARD = sys.argv[1] == "guard"
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

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    print("ERRORS", len(errors), errors[:1])
    sys.exit(1 if errors else 0)
''')


@pytest.mark.slow
def test_user_shaped_script_races_unguarded_and_completes_with_the_guard(tmp_path: Path) -> None:
    """4 threads, each compiling its own model, forward + backward + optimizer: unguarded the FX race hits;
    with the two lines the fix shows, every run completes."""
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT.format(probes=str(REPO / "checks" / "probes")))

    def run(mode: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, timeout=120)

    bare = [run("none") for _ in range(2)]
    assert any(r.returncode == 1 and "symbolically trace" in r.stdout + r.stderr for r in bare), \
        [r.stdout[-300:] for r in bare]
    for _ in range(2):
        r = run("guard")
        assert r.returncode == 0 and "ERRORS 0" in r.stdout, r.stdout[-500:] + r.stderr[-2000:]
