"""doctor.stackclass: the compile-deadlock lock cycle is named in real dumps, and nothing else is."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dfdoctor import causes
from dfdoctor.diagnose.stackclass import classify, find_cycle, parse, summarize

RESULTS = Path(__file__).resolve().parent.parent / "bench" / "results"
# Captured on an H200 (torch 2.11, flex_attention, 4 drafter threads, no guard): see docs/trainer.md.
GPU_TRAINER_LOG = RESULTS / "trainer_gpu_1_trainer_noguard.log"
GPU_PROBE_JSON = RESULTS / "trainer_gpu_1_probe_flex_noguard.json"
GPU_GUARDED_LOG = RESULTS / "trainer_gpu_1_trainer_guard.log"


def to_pyspy(faulthandler_text: str) -> str:
    """Rewrite a faulthandler dump in py-spy's `dump` layout (same frames, innermost first)."""
    out = []
    for line in faulthandler_text.splitlines():
        head = re.match(r"^(?:Current thread|Thread) (0x[0-9a-f]+)", line)
        frame = re.match(r'^\s+File "([^"]+)", line (\d+) in (\S+)', line)
        if head:
            out.append(f'Thread {int(head.group(1), 16)} (idle): "t{head.group(1)[-4:]}"')
        elif frame:
            out.append(f"    {frame.group(3)} ({frame.group(1)}:{frame.group(2)})")
    return "\n".join(out)


def test_real_gpu_trainer_deadlock_is_named() -> None:
    """The trainer's own faulthandler dump from the H200 hang: holder in the engine, waiters on the lock."""
    found = classify(GPU_TRAINER_LOG.read_text())
    assert found is not None
    cause, headline = found
    assert cause == causes.COMPILE_DEADLOCK
    # one short sentence; who holds and who waits, where, is the per-thread detail
    assert headline == ("3 threads are deadlocked in torch.compile: compile_lock held while waiting on the "
                        "autograd engine")
    detail = "\n".join(find_cycle(GPU_TRAINER_LOG.read_text()).detail())
    assert "holds compile_lock" in detail and "_engine_run_backward" in detail and "convert_frame.py" in detail


def test_real_gpu_probe_deadlock_names_the_device_thread() -> None:
    """The probe's dump: the waiter is the engine's device thread compiling a lazy backward."""
    stacks = json.loads(GPU_PROBE_JSON.read_text())["stacks"]
    cause, _ = classify(stacks)
    assert cause == causes.COMPILE_DEADLOCK
    detail = find_cycle(stacks).detail()
    assert any("waits for compile_lock in compile_fx_backward" in d for d in detail)
    assert len(detail) == find_cycle(stacks).threads == 4


def test_pyspy_layout_gives_the_same_answer() -> None:
    """py-spy's dump layout is read as well as faulthandler's, its qualified method names too."""
    text = to_pyspy(GPU_TRAINER_LOG.read_text())
    assert len(parse(text)) >= 6
    assert classify(text)[0] == causes.COMPILE_DEADLOCK
    qualified = text.replace("    __call__ (", "    ConvertFrame.__call__ (").replace(
        "    grad (", "    torch.autograd.grad (")
    assert "ConvertFrame.__call__" in qualified
    assert classify(qualified)[0] == causes.COMPILE_DEADLOCK


def _innermost(block: str) -> str:
    """The first frame line of one thread's block of a faulthandler dump."""
    frames = [ln for ln in block.splitlines() if ln.strip().startswith("File ")]
    return frames[0] if frames else ""


def test_only_the_waiter_or_only_the_holder_is_not_a_cycle() -> None:
    """Remove either side of the cycle and nothing is claimed."""
    blocks = GPU_TRAINER_LOG.read_text().split("\n\n")
    waiting = ("in compile_fx_backward", "in __call__")
    no_waiters = "\n\n".join(b for b in blocks if not _innermost(b).endswith(waiting))
    no_holder = "\n\n".join(b for b in blocks if "_trace_wrapped_higher_order_op" not in b)
    assert classify("\n\n".join(blocks))[0] == causes.COMPILE_DEADLOCK
    assert classify(no_waiters) is None
    assert classify(no_holder) is None


def test_a_finished_guarded_run_and_junk_are_not_deadlocks() -> None:
    """A log with no stacks, empty text and random lines classify as nothing."""
    assert classify(GPU_GUARDED_LOG.read_text()) is None
    assert classify("") is None
    assert classify("Thread 0x1 (most recent call first):\n  garbage\n\x00\x01") is None


def test_faulthandler_dump_of_a_live_process_parses() -> None:
    """A real all-threads dump of this interpreter: every thread found, frames innermost first."""
    import faulthandler
    import tempfile
    import threading

    ev = threading.Event()
    t = threading.Thread(target=ev.wait, name="sleeper", daemon=True)
    t.start()
    with tempfile.TemporaryFile("w+") as f:
        faulthandler.dump_traceback(f, all_threads=True)
        f.seek(0)
        text = f.read()
    ev.set()
    threads = parse(text)
    assert len(threads) >= 2
    assert any(fr.func == "wait" for th in threads for fr in th.frames[:2])
    assert classify(text) is None


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("py-spy") is None and not (Path(sys.executable).parent / "py-spy").exists(),
                    reason="py-spy not installed")
def test_real_pyspy_dump_parses(tmp_path: Path) -> None:
    """py-spy's real output on a process with a named thread blocked in a lock."""
    script = tmp_path / "blocked.py"
    script.write_text(textwrap.dedent("""
        import threading, time
        lock = threading.Lock(); lock.acquire()
        def compile_fx_backward():
            lock.acquire()
        threading.Thread(target=compile_fx_backward, name="drafter-0", daemon=True).start()
        print("ready", flush=True)
        time.sleep(30)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        out = subprocess.run([spy, "dump", "--pid", str(proc.pid)], capture_output=True, text=True, timeout=30)
    finally:
        proc.kill()
        proc.wait()
    if out.returncode != 0:
        pytest.skip(f"py-spy cannot attach here: {out.stderr.strip()[:200]}")
    threads = parse(out.stdout)
    named = {t.ident: t for t in threads}
    assert "drafter-0" in named and named["drafter-0"].frames[0].func == "compile_fx_backward"
    assert classify(out.stdout) is None  # a waiter alone (not in torch) is no cycle


def test_summary_keeps_every_thread_and_its_innermost_frames() -> None:
    """A 100-frame holder shrinks to its innermost frames; the waiters stay visible."""
    text = summarize(GPU_TRAINER_LOG.read_text(), frames=4)
    assert text.count("thread 0x") == len(parse(GPU_TRAINER_LOG.read_text()))
    assert "compile_fx_backward (torch/_inductor/compile_fx.py:2418)" in text
    assert "... 96 outer frame(s)" in text and len(text) < 6000


def test_the_main_thread_of_a_real_py_spy_dump(tmp_path):
    """The one parser reads what a live look reads: a real process waiting on an event, dumped by py-spy, has a
    main thread whose innermost frame is the wait (what `buffered` is not called for, and what `import-hang`
    quotes)."""
    from dfdoctor.diagnose import stacks
    from dfdoctor.diagnose.stackclass import main_thread
    from dfdoctor.diagnose.verdict import _innermost
    from dfdoctor.run.live import LiveFacts
    from dfdoctor.diagnose.look import blocked as _blocked

    if not stacks.py_spy():
        pytest.skip("py-spy is not installed")
    p = subprocess.Popen([sys.executable, "-c", "import threading; print('ready', flush=True); "
                          "threading.Event().wait()"], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        st = stacks.dump(p.pid)
        assert st.tool == "py-spy", st.error
        main = main_thread(st.text)
        assert main is not None and main.frames[-1].func == "<module>"
        facts = LiveFacts(pid=p.pid, watched_s=1.0, stacks=[st])
        assert _blocked(facts)
        where = _innermost(facts)
        assert where == main.frames[0].raw and where in st.text and "threading.py" in where
        assert main_thread("Thread 0x7f (most recent call first):\n  File \"x.py\", line 1 in f") is None
    finally:
        p.kill()
        p.wait()


def test_a_real_dump_of_a_job_in_a_folder_with_parentheses_and_colons_is_read(tmp_path) -> None:
    """py-spy (as dfdoctor runs it) writes `func (PATH:LINE)`; a job kept in `runs (v2):old` had no frame read at all, so no wait or cycle
    of it could be named, here or on a target."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        pytest.skip("py-spy is not installed")
    folder = tmp_path / "runs (v2):old $(x)"
    folder.mkdir()
    script = folder / "job.py"
    script.write_text("import time\n\ndef wait_for_data():\n    time.sleep(60)\n\nprint('up', flush=True)\nwait_for_data()\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        dump = subprocess.run([spy, "dump", "--full-filenames", "--pid", str(proc.pid)], capture_output=True, text=True, timeout=60)
        assert dump.returncode == 0, dump.stderr
        frames = [f for t in parse(dump.stdout) for f in t.frames]
        assert any(f.file == str(script) and f.func == "wait_for_data" and f.line == 4 for f in frames), dump.stdout
    finally:
        proc.kill()
        proc.wait()
