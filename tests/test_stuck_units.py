"""The pieces of the stuck-job verdict on their own: reading a main thread's wait from its stack and system call,
the job's rhythm, torchrun's expected ranks, and a launcher's redirect line."""

from __future__ import annotations

from pathlib import Path

from dfdoctor.diagnose import launcher, waits
from dfdoctor.diagnose.kernelwait import KernelWait
from dfdoctor.watch import rhythm, settle

SITE = "/usr/lib/python3/site-packages"
RANK0_RENDEZVOUS = f"""Thread 10 (idle): "MainThread"
    _create_c10d_store ({SITE}/torch/distributed/rendezvous.py:189)
    _env_rendezvous_handler ({SITE}/torch/distributed/rendezvous.py:267)
    init_process_group ({SITE}/torch/distributed/distributed_c10d.py:1700)
    <module> (/home/u/ddp.py:5)
"""
RANK0_ALL_REDUCE = f"""Thread 11 (idle): "MainThread"
    all_reduce ({SITE}/torch/distributed/distributed_c10d.py:3252)
    wrapper ({SITE}/torch/distributed/c10d_logger.py:83)
    <module> (/home/u/skip.py:7)
"""
USER_LINE = """Thread 12 (idle): "MainThread"
    <module> (/home/u/skip.py:9)
"""
LOADER = f"""Thread 13 (idle): "MainThread"
    select (/usr/lib/python3.11/selectors.py:415)
    _try_get_data ({SITE}/torch/utils/data/dataloader.py:1251)
    _next_data ({SITE}/torch/utils/data/dataloader.py:1440)
    __next__ ({SITE}/torch/utils/data/dataloader.py:733)
    <module> (/home/u/train.py:14)
"""
IDLE = KernelWait("futex")


def test_torch_frames_name_the_wait_and_the_users_line():
    w = waits.classify(RANK0_RENDEZVOUS, IDLE)
    assert w.kind == waits.RENDEZVOUS and w.user.short() == "<module> (/home/u/ddp.py:5)"
    w = waits.classify(RANK0_ALL_REDUCE, IDLE)
    assert (w.kind, w.detail, w.user.line) == (waits.COLLECTIVE, "all_reduce", 7)
    assert waits.classify(LOADER, KernelWait("poll", 5, "pipe:[1]")).kind == waits.DATALOADER


def test_the_kernel_names_what_a_users_line_waits_on():
    assert waits.classify(USER_LINE, KernelWait("read", 0, "pipe:[7]")).kind == waits.STDIN
    lock = waits.classify(USER_LINE, KernelWait("flock", 3, "/data/x.lock", holder=42))
    assert lock.kind == waits.LOCK and lock.detail == "/data/x.lock held by pid 42"
    assert waits.classify(USER_LINE, KernelWait("clock_nanosleep")).kind == waits.SLEEP
    net = waits.classify(USER_LINE, KernelWait("recvfrom", 5, "socket:[9]", peer="10.0.0.7:443"))
    assert net.kind == waits.SOCKET and net.detail == "10.0.0.7:443"
    assert waits.classify(USER_LINE, KernelWait("read", 5, "socket:[9]")).kind == waits.SOCKET  # not stdin
    assert waits.classify(USER_LINE.replace("(idle)", "(active)"), KernelWait("running")).kind == waits.WORKING


def test_rhythm_is_the_jobs_own_pace():
    every_5 = {"progress_lines": 5, "first_output_t": 100.0, "last_output_t": 120.0}
    assert rhythm.interval(every_5) == 5.0
    assert rhythm.still_growing(every_5, 4.0) and rhythm.still_growing(every_5, 12.0)  # not quiet after 3 s
    assert not rhythm.still_growing(every_5, 20.0)
    burst = {"progress_lines": 4, "first_output_t": 100.0, "last_output_t": 100.05}
    assert rhythm.interval(burst) is None and not rhythm.still_growing(burst, 4.0)
    assert rhythm.sample_after({"progress_lines": 5, "first_output_t": 0.0, "last_output_t": 400.0}) == \
        rhythm.SAMPLE_CAP_S  # a slow job is still looked at within 15 s of going quiet


def test_torchrun_expected_ranks():
    assert settle.expected_ranks(["torchrun", "--standalone", "--nproc_per_node", "4", "t.py"]) == 4
    assert settle.expected_ranks(["python", "-m", "torch.distributed.run", "--nproc-per-node=2", "t.py"]) == 2
    assert settle.expected_ranks(["torchrun", "--nproc_per_node", "gpu", "t.py"]) is None
    assert settle.expected_ranks(["python", "train.py"]) is None


def test_redirect_fix_rewrites_only_the_launchers_redirect(tmp_path: Path):
    script = tmp_path / "launch.sh"
    script.write_text("#!/bin/bash\ncd /x\n# python old.py > train.log\nnohup python train.py > train.log 2>&1 &\n")
    no, line, fixed = launcher.redirect_fix(script, "/x/train.log", "/logs/run 7.log")
    assert no == 4 and line.startswith("nohup")
    assert fixed == "nohup python train.py > '/logs/run 7.log' 2>&1 &"
    assert launcher.redirect_fix(script, "/x/other.log", "/logs/a.log") is None


def test_sixteen_processes_all_fit_the_reports_evidence():
    """Every process of a 16-process job keeps its line and its innermost frame within the 60 lines a report
    shows (doctor/render/html.py EVIDENCE_LINES)."""
    from dfdoctor.diagnose import stuck
    from dfdoctor.diagnose.jobstacks import Look, ProcessSample
    from dfdoctor.diagnose.stacks import Stacks
    from dfdoctor.render.html import EVIDENCE_LINES

    procs = []
    for r in range(16):
        text = RANK0_ALL_REDUCE if r else USER_LINE
        p = ProcessSample(100 + r, 1, ["python", "t.py"], True, rank=r, local_rank=r, world_size=16)
        p.looks = [Look(Stacks(p.pid, text, "py-spy"), IDLE, 1.0, 5)] * 2
        procs.append(p)
    found = stuck.judge(procs, 20.0)
    assert found.cause == "collective-hang" and found.headline.endswith("rank 0 never joined it")
    assert len(found.lines) + 3 <= EVIDENCE_LINES, len(found.lines)
    for p in procs:
        assert any(line.startswith(f"pid {p.pid} (rank {p.rank})") for line in found.lines)


def _torchrun_with(rank1: str, kernel: KernelWait, joined, nproc: int = 2) -> list:
    """torchrun's agent asked for `nproc` ranks, of which only rank 1 is left (rank 0 ended)."""
    from dfdoctor.diagnose.jobstacks import Look, ProcessSample
    from dfdoctor.diagnose.stacks import Stacks

    agent = ProcessSample(50, 1, ["python", "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "t.py"],
                          True)
    agent.looks = [Look(Stacks(50, "", "py-spy"), KernelWait("wait4"), 1.0, 5)] * 2
    r1 = ProcessSample(52, 50, ["python", "t.py"], True, rank=1, local_rank=1, world_size=nproc)
    r1.store, r1.joined = "localhost:29500", joined
    r1.looks = [Look(Stacks(52, rank1, "py-spy"), kernel, 1.0, 5)] * 2
    return [agent, r1]


def test_a_rank_left_behind_by_ranks_that_ended_is_rank_missing_only_if_it_never_joined(tmp_path):
    """Rank 1 asleep at line 9 of a script whose init_process_group comes at line 11 (diagnose/init_ahead.py: a
    rank past every such call, or whose file cannot be read, has left the group rather than never joined it)."""
    from dfdoctor.diagnose import stuck

    script = tmp_path / "skip.py"
    script.write_text("import time\n" * 8 + "time.sleep(600)\n\nimport torch.distributed as dist; "
                      "dist.init_process_group('gloo')\n")
    rank1 = USER_LINE.replace("/home/u/skip.py", str(script))
    asleep = KernelWait("clock_nanosleep")
    found = stuck.judge(_torchrun_with(rank1, asleep, joined=False), 20.0)
    assert found.cause == "rank-missing" and found.state == "failed", found
    assert found.headline.startswith("rank 1 never joined the process group; rank 0 already ended")
    assert any("no connection to the rendezvous store localhost:29500" in line for line in found.lines)
    # unknown sockets (a target): still named, without the claim about the store
    found = stuck.judge(_torchrun_with(rank1, asleep, joined=None), 20.0)
    assert found.cause == "rank-missing" and not any("rendezvous store" in line for line in found.lines)
    # it joined (a connection to the store) and rank 0 finished first: its own wait, no missing rank
    assert stuck.judge(_torchrun_with(rank1, asleep, joined=True), 20.0).cause == "sleeping"
    # past its file's init_process_group (or in a file not readable here): it left the group, no missing rank
    assert stuck.judge(_torchrun_with(USER_LINE, asleep, joined=False), 20.0).cause == "sleeping"
    # four local ranks asked for, rank 1 alone left: ranks 0, 2, 3 ended
    found = stuck.judge(_torchrun_with(rank1, asleep, joined=False, nproc=4), 20.0)
    assert "ranks 0, 2, 3 already ended" in found.headline, found.headline


def test_the_target_agent_names_a_socket_peer_from_procs_own_tables():
    """agent.waits (shipped to targets, standard library only) reads the socket a process waits on and the
    host:port at its other end from /proc/PID/net/tcp; from_raw turns that into the wait the rules read, also
    for a recv with a timeout (a poll, whose descriptors sit in the process's memory)."""
    import socket
    import subprocess
    import sys
    import time

    from dfdoctor.diagnose.kernelwait import from_raw
    from dfdoctor.agent import waits as agent_waits

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    procs = []
    try:
        for timeout in ("None", "300"):  # recvfrom; poll then recvfrom
            procs.append(subprocess.Popen([sys.executable, "-c", f"import socket; s = socket.create_connection("
                                           f"('127.0.0.1', {port}), timeout={timeout}); s.recv(10)"]))
        conns = [server.accept()[0] for _ in procs]
        for p in procs:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                raw = open(f"/proc/{p.pid}/syscall").read().strip()
                k = from_raw(raw, agent_waits.wait_fds(p.pid, raw), "")
                if k.is_socket:
                    break
                time.sleep(0.1)
            assert k.is_socket and k.peer == f"127.0.0.1:{port}", (raw, k)
            assert waits.classify(USER_LINE, k).detail == f"127.0.0.1:{port}"
        assert {from_raw(open(f"/proc/{p.pid}/syscall").read(), {}, "").syscall for p in procs} == {"recvfrom", "poll"}
        del conns
    finally:
        for p in procs:
            p.kill()
            p.wait()
        server.close()


def test_a_rank_spinning_in_a_collective_waits_for_the_rank_held_elsewhere():
    """NCCL waits by spinning: on the H200 a rank 0 in all_reduce burned CPU while rank 1 slept before
    init_process_group, and the job was called running (bench/results/h200_round6_stuck). The same place in both
    looks is a wait when the peer it waits for is seen held elsewhere; with every peer moving, it is no verdict."""
    from dfdoctor.diagnose import stuck
    from dfdoctor.diagnose.jobstacks import Look, ProcessSample
    from dfdoctor.diagnose.stacks import Stacks

    def job(peer_cpu: float) -> list:
        r0 = ProcessSample(100, 1, ["python", "t.py"], True, rank=0, local_rank=0, world_size=2)
        r0.looks = [Look(Stacks(100, RANK0_ALL_REDUCE, "py-spy"), IDLE, 1.0, 5),
                    Look(Stacks(100, RANK0_ALL_REDUCE, "py-spy"), IDLE, 2.0, 900)]  # a core's worth of spinning
        r1 = ProcessSample(101, 1, ["python", "t.py"], True, rank=1, local_rank=1, world_size=2)
        r1.looks = [Look(Stacks(101, USER_LINE, "py-spy"), IDLE, 1.0, 5),
                    Look(Stacks(101, USER_LINE, "py-spy"), IDLE, 1.0 + peer_cpu, 5 if not peer_cpu else 900)]
        return [r0, r1]

    found = stuck.judge(job(peer_cpu=0.0), 20.0)
    assert found is not None and found.cause == "collective-hang", found
    assert found.headline.endswith("rank 1 never joined it"), found.headline
    assert stuck.judge(job(peer_cpu=1.0), 20.0) is None or stuck.judge(job(peer_cpu=1.0), 20.0).cause != "collective-hang"


def test_a_fast_rhythm_is_said_in_milliseconds():
    """nanoGPT's CPU recipe prints ~30 iterations a second: its evidence read `prints every ~0.0 s`."""
    fast = {"progress_lines": 101, "first_output_t": 0.0, "last_output_t": 3.1}
    slow = {"progress_lines": 5, "first_output_t": 0.0, "last_output_t": 20.0}
    assert rhythm.words(fast, 3.3, 0.0).startswith("prints every ~31 ms;")
    assert rhythm.words(slow, 23.0, 0.0).startswith("prints every ~5.0 s;")


def _dump(*threads: tuple[str, list[str]]) -> str:
    """A py-spy dump of the threads given (name, frames innermost first)."""
    out = ["Process 1: python x.py", ""]
    for i, (name, frames) in enumerate(threads):
        out.append(f'Thread {100 + i} (idle): "{name}"')
        out += [f"    {f}" for f in frames]
    return "\n".join(out)


def test_every_thread_is_read_with_its_lock_and_the_locks_it_holds(tmp_path: Path):
    """Issue 41: py-spy shows no C frame; the user's own line and the `with` blocks around it say which lock a
    thread waits for and which it holds; two threads holding each other's lock are a cycle."""
    from dfdoctor.diagnose import threadwaits

    src = tmp_path / "deadlock.py"
    src.write_text("import threading\na, b = threading.Lock(), threading.Lock()\n\n\ndef one():\n    with a:\n"
                   "        x = 1\n        with b:\n            pass\n\n\ndef two():\n    with b:\n"
                   "        with a:\n            pass\n")
    lib = "/usr/lib/python3.11/threading.py"
    text = _dump(("MainThread", [f"Thread._wait_for_tstate_lock ({lib}:1139)", f"Thread.join ({lib}:1119)",
                                 f"<module> ({src}:20)"]),
                 ("one", [f"one ({src}:8)", f"Thread.run ({lib}:982)"]),
                 ("two", [f"two ({src}:14)", f"Thread.run ({lib}:982)"]))
    got = threadwaits.threads_of(text, "futex")
    assert [(t.thread, t.kind, t.lock, t.holds) for t in got] == [
        ("MainThread", "join", "", ()), ("one", "lock", "b", ("a",)), ("two", "lock", "a", ("b",))]
    cycle = threadwaits.lock_cycle(got)
    assert cycle is not None and {t.thread for t in cycle} == {"one", "two"}
    free = threadwaits.threads_of(_dump(("one", [f"one ({src}:8)"]), ("two", [f"two ({src}:13)"])))
    assert threadwaits.lock_cycle(free) is None  # two waits at `with b` hold nothing the other wants


def test_an_event_waits_in_a_condition_and_is_called_an_event():
    """The bare names of some dumps (`wait`, `wait`) are qualified from threading.py itself."""
    import threading as th

    from dfdoctor.diagnose import threadwaits

    lib = th.__file__
    lines = open(lib).read().splitlines()
    ev = next(i for i, line in enumerate(lines, 1) if "signaled = self._cond.wait(timeout)" in line)
    cond = next(i for i, line in enumerate(lines, 1) if "waiter.acquire()" in line)
    text = _dump(("MainThread", [f"wait ({lib}:{cond})", f"wait ({lib}:{ev})", "<module> (/tmp/job.py:5)"]))
    (t,) = threadwaits.threads_of(text, "futex")
    assert t.kind == "Event" and t.words().startswith("waits on an Event at <module> (/tmp/job.py:5)")


def _still(pid: int, text: str, cpu: tuple[float, float] = (1.0, 1.0)):
    """A process looked at twice, the same stacks both times, `cpu` seconds spent at each look."""
    from dfdoctor.diagnose.jobstacks import Look, ProcessSample
    from dfdoctor.diagnose.kernelwait import KernelWait
    from dfdoctor.diagnose.stacks import Stacks

    p = ProcessSample(pid, 1, ["python", "job.py"], True)
    p.looks = [Look(Stacks(pid, text, "py-spy"), KernelWait("futex"), c, 10) for c in cpu]
    return p


def test_every_thread_waiting_is_stuck_only_while_nothing_moves():
    """Issue 41: a main thread joining a worker that waits on an Event nobody sets: stuck, said with the Event's
    thread and why nothing ends it; the same stacks with CPU spent between the looks: no finding (progress)."""
    import threading as th

    from dfdoctor.diagnose import stuck

    lib = th.__file__
    lines = open(lib).read().splitlines()
    ev = next(i for i, line in enumerate(lines, 1) if "signaled = self._cond.wait(timeout)" in line)
    text = _dump(("MainThread", [f"Thread._wait_for_tstate_lock ({lib}:1139)", f"Thread.join ({lib}:1119)",
                                 "<module> (/tmp/job.py:9)"]),
                 ("worker", [f"Condition.wait ({lib}:327)", f"Event.wait ({lib}:{ev})", "work (/tmp/job.py:4)"]))
    found = stuck.judge([_still(7, text)], 30.0)
    assert found is not None and (found.state, found.cause) == ("failed", "stuck"), found
    assert found.headline == ("every thread of the job waits (2 in 1 process(es)); thread worker of pid 7 (python) "
                              "waits on an Event at work (/tmp/job.py:4): every thread that could set it waits too")
    assert stuck.judge([_still(7, text, cpu=(1.0, 1.9))], 30.0) is None  # it spent CPU: not stuck
