"""What dfdoctor runs on a target to read a run folder there, without dfdoctor installed there.

A part of the agent (`dfdoctor.agent.ship`): `remote_run.fetch` sends the agent over stdin to the target's
python (3.6+, standard library only), which runs this part as `target-agent RUN_DIR LIVE FULL`. Where a job's
output goes is read by `procfs.job_outputs`, the one reading of a job's fds that the record, a local look and
this one share.

It answers on stdout after a marker, as one JSON object: the run folder's files, whether its recorder and
job still live (a pid counts only with the start time the record gave it) and their process states (a zombie
job, a stopped recorder), and, for a live job when asked, what it does now: where its fds 1 and 2 go, other logs
it writes, its stacks, whether its Python buffers stdout, each process's named rendezvous variables and TCP
connections (what a local look reads with psutil).
Liveness is looked at BEFORE the record is read for the answer, so a recorder found dead has already written its
last word into what is sent back.
"""

import json
import os
import sys
import time

from dfdoctor.agent import ranks as agent_ranks
from dfdoctor.agent.procfs import (buffers_stdout, children, is_job_of, is_recorder_of, job_outputs,
                                   kernel_lists_children, proc_cpu_s, proc_ppid, proc_state, settled_syscall,
                                   stat_fields)

# shutil, subprocess and the wait readers (socket, platform, struct) are imported by the looks at a live job that
# use them, not here: most answers are the watch's polls of the run folder (live 0), 120 of a test file's 141
# sessions, and `stop` imports this module for MARK alone. They were 45 M instructions of each start's 145 M.

MARK = "@@dfdoctor-answer@@"
LIMIT = 64 << 10  # bytes of each output stream sent back
MAX_PROCESSES = 16  # of the job's tree looked at
MAX_STACKS = 4  # py-spy takes up to 5 s a process
READS = 3  # a py-spy read that failed on a running process is tried again (_read_till_read)
MAX_SOURCES, SOURCE_LIMIT = 8, 256 << 10  # the user's files a look's stacks name, sent back whole or not at all
_LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python3", "/torch/")  # as diagnose/waits.is_library
# The variables of a process's environment the readings need, by name, never the whole environment (it holds
# secrets): its rank, its rendezvous store (init_process_group's env://), torchrun's rendezvous as its PET_
# variables give it (dfdoctor.diagnose.elastic.torchrun_asked: each option of its rendezvous it reads)
NAMED_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PET_RDZV_BACKEND",
             "PET_RDZV_ENDPOINT", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NNODES", "PET_RDZV_CONF",
             "PET_NODE_RANK", "PET_RDZV_ID", "PET_NPROC_PER_NODE", "PET_STANDALONE")


def rd(path, n=None):
    """A file's text (its last `n` bytes when given), or None."""
    try:
        with open(path, "rb") as f:
            if n:
                size = f.seek(0, 2)
                f.seek(max(0, size - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def events(text):
    """The first record event of each name."""
    out = {}
    for line in (text or "").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict):
            out.setdefault(e.get("event"), e)
    return out


def tree(root):
    """The job's process and its descendants, breadth first, at most MAX_PROCESSES; each one's children in
    ascending pid order (as /proc lists them). Read from the kernel's children lists where it keeps them: only the
    tree's own processes are read, where the walk by parent read every process of the machine on each look (a
    target that is a busy host: hundreds, a test suite's thousands)."""
    if kernel_lists_children():
        out, todo = [], [root]
        while todo and len(out) < MAX_PROCESSES:
            p = todo.pop(0)
            out.append(p)
            todo += children(p)
        return out
    kids = {}
    for n in os.listdir("/proc"):
        parent = proc_ppid(int(n)) if n.isdigit() else None
        if parent is not None:
            kids.setdefault(parent, []).append(int(n))
    out, todo = [], [root]
    while todo and len(out) < MAX_PROCESSES:
        p = todo.pop(0)
        out.append(p)
        todo += kids.get(p, [])
    return out


def fetch(d, live, full, ranks=False):
    """The answer about run folder `d` (see the module's docstring); with `ranks`, torchrun's ranks of a live
    job, each looked at once (ranks.py: what the settle check reads)."""
    ev = events(rd(os.path.join(d, "record.jsonl")))
    rec, sp = ev.get("recorder"), ev.get("spawned")
    ans = {"boot_id": (rd("/proc/sys/kernel/random/boot_id") or "").strip() or None,
           "recorder_alive": bool(rec and "recorder-exit" not in ev and is_recorder_of(rec, d)),
           "job_alive": bool(sp and "exit" not in ev and is_job_of(sp, rec, d)), "files": {}}
    record = rd(os.path.join(d, "record.jsonl"))
    later = events(record)  # read once: each reading parses every line of the record
    finished = "exit" in later or "recorder-exit" in later
    ans["files"]["record.jsonl"] = record
    for name in ("spec.json", "heartbeat", "launcher.jsonl"):
        ans["files"][name] = rd(os.path.join(d, name))
    if full or live or finished or not ans["recorder_alive"]:
        ans["files"]["recorder.out"] = rd(os.path.join(d, "recorder.out"), 8192)
        for s in ("stdout", "stderr"):
            segs = [os.path.join(d, "%s.tail.%d" % (s, i)) for i in (0, 1)]
            segs = sorted((p for p in segs if os.path.exists(p)), key=lambda p: os.stat(p).st_mtime)
            text = "".join(rd(p, LIMIT) or "" for p in [os.path.join(d, s + ".log")] + segs)
            ans["files"][s + ".log"] = text[-LIMIT:]
    if ans["job_alive"]:  # a zombie nobody reaped still passes as alive; its recorder may be stopped (T, t)
        rpid = (rec or {}).get("pid")
        ans["job_state"] = proc_state(sp["pid"])
        ans["recorder_state"] = proc_state(rpid) if isinstance(rpid, int) and ans["recorder_alive"] else None
    if live and ans["job_alive"] and ans["job_state"] == "Z":
        ans["live"] = {"pid": sp["pid"], "zombie": True}  # it has ended: nothing of it is left to look at
    elif live and ans["job_alive"]:
        spec = json.loads(ans["files"]["spec.json"] or "{}")
        ans["live"] = look(sp["pid"], d, spec.get("log"))
    if ranks and ans["job_alive"]:
        import shutil

        spy = shutil.which("py-spy") or shutil.which("py-spy", path=os.path.dirname(sys.executable))
        ans["ranks"] = agent_ranks.ranks(tree(sp["pid"]), lambda p: one_look(p, spy))
    return ans


def look(pid, d, log):
    """What a live job does now: where its output goes, its stacks, whether its Python buffers stdout."""
    import shutil

    # py-spy reads a stuck job's stacks from outside; on the target it is found on PATH or beside its python
    spy = shutil.which("py-spy") or shutil.which("py-spy", path=os.path.dirname(sys.executable))
    pids = tree(pid)
    outputs = job_outputs(pids, d, log, pid, sizes=True)
    facts = {"pid": pid, "stdout_targets": outputs["streams"], "other_logs": outputs["files"], "python": False,
             "buffered": False, "stacks": []}
    for p in pids:
        cmd = (rd("/proc/%d/cmdline" % p) or "").split("\0")
        try:
            exe = os.path.basename(os.readlink("/proc/%d/exe" % p))
        except OSError:
            exe = os.path.basename(cmd[0])
        stack = None
        if "python" in exe and spy and len(facts["stacks"]) < MAX_STACKS:
            stack, why = py_spy_dump(spy, p)
        else:
            why = "py-spy is not on the target"
        if stack is None and (p == pid or "python" in exe):
            stack = {"pid": p, "text": kernel_threads(p), "tool": "kernel", "error": why}
        if stack:
            facts["stacks"].append(stack)
        if "python" in exe:
            facts["python"] = True
            environ = dict(e.split("=", 1) for e in (rd("/proc/%d/environ" % p) or "").split("\0") if "=" in e)
            facts["buffered"] = facts["buffered"] or buffers_stdout(p, cmd, environ)
    facts["cpu_s"] = proc_cpu_s(pid)
    facts["samples"] = sample(pids, spy)
    return facts


def one_look(p, spy):
    """What dfdoctor.diagnose.jobstacks reads of one process, raw: its main thread's system call (before py-spy
    touches it), the descriptor that call names, its stack, CPU time and context switches."""
    from dfdoctor.agent.waits import wait_fds

    syscall = (settled_syscall(p) or "").strip()
    fds = wait_fds(p, syscall)
    stack = _read_till_read(spy, p) if spy else None
    switches, voluntary = 0, None
    for line in (rd("/proc/%d/task/%d/status" % (p, p)) or "").splitlines():
        if "ctxt_switches:" in line:
            n = int(line.split(":", 1)[1].strip() or 0)
            switches += n
            voluntary = n if line.startswith("voluntary_") else voluntary
    return {"syscall": syscall, "fds": fds, "stack": stack["text"] if stack else "", "cpu_s": proc_cpu_s(p),
            "switches": switches, "voluntary": voluntary,  # the voluntary ones: a sleep or a read ended
            "t": time.time()}  # when the switches were read: wake-ups are per second


def _read_till_read(spy, p):
    """The stack py-spy reads of a running process without pausing it, read again (READS in all) while py-spy
    answers that it could not ("Failed to get stack traces": the stack changed under it). Of 400 looks at a job
    spinning over an empty DataLoader here (load 11-14), 17 failed a first read, 2 a second, none a third. A node
    takes no more looks: a look not read is one less that tells that loop from a buffered stdout. Only that
    answer: one that stays (permission denied, no interpreter found) would cost READS reads of each process."""
    for _ in range(READS):
        stack, why = py_spy_dump(spy, p, nonblocking=True)
        if stack is not None or "Failed to get stack traces" not in why:
            return stack
    return None


def sample(pids, spy):
    """Every process of the tree looked at twice, a second apart (dfdoctor.diagnose.jobstacks does the same
    here), with what is known of each: command, parent, rank, buffering."""
    from dfdoctor.agent.waits import tcp_connections

    procs, tables = [], {}
    for p in pids:
        cmd = (rd("/proc/%d/cmdline" % p) or "").split("\0")
        env = dict(e.split("=", 1) for e in (rd("/proc/%d/environ" % p) or "").split("\0") if "=" in e)
        try:
            exe = os.path.basename(os.readlink("/proc/%d/exe" % p))
        except OSError:
            exe = os.path.basename(cmd[0])
        ppid = proc_ppid(p)
        st = stat_fields(p)
        if st and st[0] == "Z":  # a dead child nobody reaped: its exit status is all it has left to say
            procs.append({"pid": p, "ppid": ppid, "zombie": True, "looks": [], "gone": True,
                          "exited": int(st[-1]) if len(st) >= 50 and st[-1].lstrip("-").isdigit() else None})
            continue
        procs.append({"pid": p, "ppid": ppid, "cmdline": [c for c in cmd if c], "python": "python" in exe,
                      "env": {k: env[k] for k in NAMED_ENV if k in env},
                      "buffered": "python" in exe and buffers_stdout(p, cmd, env), "looks": []})
        if "python" in exe and meets_others(cmd, env):  # its sockets' other ends: a rank's store, torchrun's
            procs[-1]["tcp"] = tcp_connections(p, tables)  # rendezvous endpoint (what the readings ask of them)
    for i in (0, 1):
        for pr in procs:
            if pr.get("zombie"):
                continue
            if i:  # a second after its first look ended: a py-spy slow to start under load read the first look's
                # stack late, and counted from the round's start the two were 0.41 s apart (load 16-22)
                time.sleep(max(0.0, pr["looks"][0]["t"] + 1.0 - time.time()))
            pr["looks"].append(one_look(pr["pid"], spy if pr["python"] else None))
            pr["gone"] = not os.path.exists("/proc/%d" % pr["pid"])
    return {"procs": procs, "locks": rd("/proc/locks") or "", "sources": sources(procs)}


def meets_others(cmd, env):
    """Whether the process's TCP connections say anything a reading asks: a rank's (RANK and LOCAL_RANK, as
    jobstacks reads them) with a store (MASTER_PORT), or torchrun's agent (its rendezvous endpoint). Others'
    sockets are not read: each read of a busy host's table costs milliseconds."""
    rank = "RANK" in env and "LOCAL_RANK" in env
    return (rank and bool(env.get("MASTER_PORT"))) or \
        (not rank and agent_ranks.is_torchrun(cmd))


def sources(procs):
    """The text of the user's own files the looks' stacks name, as they are where the job runs: which lock a
    `with data:` line waits for is read from the line itself (diagnose/threadwaits), and the job's files are
    here, not where dfdoctor reads the answer (a container's /tmp/x/train.py is no file on the laptop)."""
    out = {}
    for pr in procs:
        for lk in pr["looks"]:
            for path in frame_files(lk.get("stack") or ""):
                if path in out or len(out) >= MAX_SOURCES or any(part in path for part in _LIBRARY):
                    continue
                try:
                    with open(path, "rb") as f:
                        data = f.read(SOURCE_LIMIT + 1)
                except OSError:
                    continue
                if len(data) <= SOURCE_LIMIT:
                    out[path] = data.decode("utf-8", "replace")
    return out


def frame_files(stack):
    """The absolute .py files of a py-spy dump's frame lines (`    func (FILE:LINE)`, as stackclass reads them; the
    agent keeps no patterns of its own: tests/test_recorder.py)."""
    for line in stack.splitlines():
        line = line.rstrip()
        at = line.rfind(" (")
        if at < 0 or not line.endswith(")"):
            continue
        path, _, number = line[at + 2:-1].rpartition(":")
        if path.startswith("/") and path.endswith(".py") and number.isdigit():
            yield path


def py_spy_dump(spy, p, nonblocking=False):
    """(the stack entry, None), or (None, why py-spy could not read process `p`)."""
    import subprocess

    from dfdoctor.agent.pyspy_words import py_spy_error

    try:
        r = subprocess.run([spy, "dump", "--full-filenames", "--pid", str(p)] + (["--nonblocking"] if nonblocking
                                                                                  else []), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=5)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, "py-spy: %s" % exc
    if r.returncode == 0 and r.stdout.strip():
        return {"pid": p, "text": r.stdout.decode("utf-8", "replace").strip(), "tool": "py-spy"}, None
    return None, py_spy_error(r.stderr.decode("utf-8", "replace")) or "status %d" % r.returncode


def kernel_threads(p):
    """Each thread's state and the kernel function it waits in: the stacks there are without py-spy."""
    lines = []
    for tid in sorted(os.listdir("/proc/%d/task" % p) if os.path.isdir("/proc/%d/task" % p) else []):
        st = stat_fields(p, tid)
        comm = (rd("/proc/%d/task/%s/comm" % (p, tid)) or "?").strip()
        wchan = (rd("/proc/%d/task/%s/wchan" % (p, tid)) or "?").strip() or "-"
        state = st[0] if st else "?"
        lines.append("thread %s (%s): state %s, waits in %s" % (tid, comm, state, wchan))
    return "\n".join(lines)


def main(argv):
    """`target-agent RUN_DIR LIVE FULL [RANKS]` (LIVE, FULL, RANKS: 1 or 0)."""
    if len(argv) not in (4, 5):
        sys.stderr.write("usage: target-agent RUN_DIR LIVE FULL [RANKS]\n")
        return 2
    answer = fetch(argv[1], argv[2] == "1", argv[3] == "1", len(argv) == 5 and argv[4] == "1")
    sys.stdout.write(MARK + json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
