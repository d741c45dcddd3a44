"""compile.race's static reading (dfdoctor.checks.compile_scan) on scripts of the shapes users write: which
threads run compiled code, and whether the proven guard is applied unconditionally on their path."""

from __future__ import annotations

import textwrap
from pathlib import Path

from dfdoctor.checks import compile_scan

USERS = Path(__file__).resolve().parent / "jobs" / "compile_users"


def scan(name: str) -> compile_scan.Scan:
    return compile_scan.scan(compile_scan.own_modules(USERS / name, [USERS]))


def test_thread_target_with_the_guard_around_each_step_is_proven() -> None:
    """worker() compiles its own model and runs each step in `with compile_guard(...)`: proven; the scan also
    read the model module the script imports."""
    files = [p.name for p in compile_scan.own_modules(USERS / "user.py", [USERS])]
    assert files == ["user.py", "model.py"]
    s = scan("user.py")
    assert s.threaded == ["user.py:16 thread runs worker()"] and s.guarded
    assert s.proven == ["user.py:11 with compile_guard(...) in worker()"]


def test_flag_under_an_untaken_if_and_a_lock_are_seen_not_proven() -> None:
    """Issue 12's repro shape: the flag only under an `if`, a lock in the helper module: not a guard."""
    s = scan("cond.py")
    assert s.compiles_in_threads and not s.guarded
    assert s.unguarded == ["drafter() (cond.py:11) runs compiled code with no proven guard on its path"]
    assert any("force_non_lazy_backward_lowering (under an if at line 6)" in x and "seen, not proven" in x
               for x in s.seen)
    assert any(x.startswith("helpers.py:5 with lock") and "seen, not proven" in x for x in s.seen)


def test_thread_pool_with_the_guard_under_a_condition_is_not_proven() -> None:
    """executor.map(work, ...) with @torch.compile: the guard in one branch only is seen, not proven."""
    s = scan("pool.py")
    assert s.threaded == ["pool.py:17 thread runs work()"] and not s.guarded
    assert any("pool.py:11 with compile_guard(...) under a condition (line 10)" in x for x in s.seen)
    assert "pool.py:6 @torch.compile" in s.compiles


def test_thread_subclass_with_module_compile_is_followed() -> None:
    """class Drafter(threading.Thread) with self.model.compile() and the guard in run(): proven."""
    s = scan("sub.py")
    assert s.guarded and "sub.py:7 model.compile()" in s.compiles and s.threads == ["sub.py:3 class Drafter(Thread)"]


def test_decorated_step_and_submit_are_proven(tmp_path: Path) -> None:
    """@compile_guard on the step the pool's function calls, submit() with functools.partial."""
    (tmp_path / "t.py").write_text(textwrap.dedent("""
        import functools, torch
        from concurrent.futures import ThreadPoolExecutor
        from dfdoctor.guard import compile_guard

        model = torch.compile(torch.nn.Linear(4, 4))

        @compile_guard
        def step(x):
            model(x).sum().backward()

        def job(i, n):
            for _ in range(n):
                step(torch.randn(2, 4))

        with ThreadPoolExecutor(4) as pool:
            for i in range(4):
                pool.submit(functools.partial(job, i), 3)
    """))
    s = compile_scan.scan([tmp_path / "t.py"])
    assert s.threaded and s.guarded and any("@compile_guard step()" in p for p in s.proven), s


def test_unlinked_threads_are_said_not_guessed(tmp_path: Path) -> None:
    """A lambda target calling a compiled function from a list: compiles and threads, but not linked."""
    (tmp_path / "l.py").write_text("import threading, torch\nfns = [torch.compile(abs)]\n"
                                   "ts = [threading.Thread(target=lambda f=f: f(1)) for f in fns]\n")
    s = compile_scan.scan([tmp_path / "l.py"])
    assert s.unlinked and s.compiles_in_threads and not s.guarded
