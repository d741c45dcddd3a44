"""`dfdoctor stop`, where the job runs: end every process of a run's job, and only those.

A part of the agent (`stop RUN_DIR GRACE_S`), run here in dfdoctor's own process and on a target behind the
loader; standard library only, Python 3.6. It answers one JSON object after target_agent's MARK.

Which processes are the job's is proven, never taken from the run folder's word (a folder can be forged, a pid
reused): a process is the job's when
- its own environment carries the run's marker (names.RUN_ENV), which the recorder drew for this run, kept in the
  record, and gave the job; every process of the job inherits it, torchrun's ranks in sessions of their own and
  the daemon a launcher backgrounded included; the marker must name the folder's own run id and the record
  must be this very folder's (its device and inode: a record copied into another folder, or a `cp -a` of the
  project, proves nothing there); or
- it descends from the run's recorder (a subreaper: the job's orphans become its children), the recorder itself
  proven by its pid, its start time and a command line that names this very folder.
Each is signalled only while its start time is still the one it was found with. SIGTERM first, to all of them
at once; after GRACE_S those still there get SIGKILL. Then the recorder, which sees its job end, writes the end
into the record and exits by itself; should it not (something unproven holds the job's pipes), it is ended too.
"""

import json
import os
import signal
import sys
import time

from dfdoctor.agent.names import MARKER, MARKER_TEXT, RECORD, RUN_ENV
from dfdoctor.agent.procfs import (cmdline, environ, folder_identity, is_recorder_of, proc_entry, proc_ppid,
                                   proc_start_time, proc_state, read_text)
from dfdoctor.agent.target_agent import MARK

GRACE_S = 10.0  # between SIGTERM and SIGKILL (`dfdoctor stop --grace`)
KILL_WAIT_S = 3.0  # after SIGKILL: the kernel ends a process at once, unless it sits in an uninterruptible wait
RECORDER_WAIT_S = 5.0  # for the recorder to write the job's end and exit by itself
POLL_S = 0.05


def record_events(run_dir):
    """The record's events, in order (a torn line skipped)."""
    out = []
    for line in (read_text(os.path.join(run_dir, RECORD)) or "").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict):
            out.append(e)
    return out


def first(events, name):
    return next((e for e in events if e.get("event") == name), None)


def folder_run_id(run_dir):
    """The run id the folder's marker file names, or None."""
    text = read_text(os.path.join(run_dir, MARKER)) or ""
    return text[len(MARKER_TEXT):] if text.startswith(MARKER_TEXT) else None


def run_marker(run_dir, events):
    """The marker value the job's processes carry, when the record has one for this very folder's run: its id,
    and the folder the recorder wrote into (device and inode; a `cp -a` of the project copies the id too)."""
    spawned = first(events, "spawned") or {}
    marker, run_id = spawned.get("marker"), folder_run_id(run_dir)
    if spawned.get("folder") is None or spawned.get("folder") != folder_identity(run_dir):
        return None
    if isinstance(marker, str) and run_id and marker.startswith(run_id + ":") and len(marker) > len(run_id) + 8:
        return marker
    return None


def alive(entry):
    """Whether the process an entry names is still that process (same start time) and not a zombie."""
    return proc_start_time(entry["pid"]) == entry["start_ticks"] and proc_state(entry["pid"]) not in (None, "Z")


def the_recorder(run_dir, events):
    """The run's recorder as an entry, when it still runs and is proven to be this folder's (procfs.is_recorder_of:
    the pid and start time the record gives it, and a command line that names this folder). None otherwise."""
    rec = first(events, "recorder")
    if not rec or first(events, "recorder-exit") or not is_recorder_of(rec, run_dir):
        return None
    entry = proc_entry(rec["pid"])
    return entry if alive(entry) else None


def processes():
    """Every process now: {pid: parent pid}."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            parent = proc_ppid(int(name))
            if parent is not None:
                out[int(name)] = parent
    return out


def members(recorder, marker):
    """The job's processes now, proven: {pid: entry with `why`}. The recorder and its stand-in (a fork of it,
    with its command line) are not the job; neither is this process."""
    table = processes()
    found = {}
    if recorder is not None:
        rec_pid, rec_cmd = recorder["pid"], cmdline(recorder["pid"])
        kids = {}
        for pid, parent in table.items():
            kids.setdefault(parent, []).append(pid)
        todo = [p for p in kids.get(rec_pid, []) if cmdline(p) != rec_cmd]
        while todo:
            pid = todo.pop()
            found[pid] = "under the run's recorder (pid %d)" % rec_pid
            todo += kids.get(pid, [])
    if marker is not None:
        for pid in table:
            if pid not in found and (environ(pid, having=RUN_ENV) or {}).get(RUN_ENV) == marker:
                found[pid] = "carries the run's marker (%s)" % RUN_ENV
    out = {}
    for pid, why in found.items():
        entry = proc_entry(pid)
        if pid != os.getpid() and entry["start_ticks"] is not None and alive(entry):
            entry["why"] = why
            out[pid] = entry
    return out


def send(entry, sig):
    """Signal the process an entry names, only while it is still that process. Returns None when sent, else why
    not."""
    if not alive(entry):
        return "gone"
    try:
        os.kill(entry["pid"], sig)
    except ProcessLookupError:
        return "gone"
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def named_in_record(events):
    """The processes the record names as the job's (its main process, what it left or handed its work to): what
    the answer says was already gone, or named but not proven."""
    out = []
    spawned = first(events, "spawned")
    if spawned and isinstance(spawned.get("pid"), int):
        out.append({"pid": spawned["pid"], "start_ticks": spawned.get("start_ticks"),
                    "cmdline": " ".join(spawned.get("argv") or [])[:200]})
    ex = first(events, "exit") or {}
    for pid, ticks in sorted((ex.get("leftover_starts") or {}).items()):
        out.append({"pid": int(pid), "start_ticks": ticks, "cmdline": ""})
    for h in ex.get("handed_off") or []:
        out.append({"pid": h.get("pid"), "start_ticks": h.get("start_ticks"), "cmdline": h.get("cmdline") or ""})
    seen, unique = set(), []
    for e in out:
        if isinstance(e["pid"], int) and e["pid"] not in seen:
            seen.add(e["pid"])
            unique.append(e)
    return unique


def job_running(events):
    """Whether the record says the job still runs: no end yet, or its work goes on in what it handed it to."""
    return first(events, "exit") is None or (first(events, "handoff") is not None and
                                             first(events, "handoff-ended") is None)


def stop(run_dir, grace_s=GRACE_S):
    """End the run's job (see the module's docstring); what was done, as a dict:
    stopped: [{pid, start_ticks, cmdline, why, signal}], gone: the record's processes already ended,
    unproven: the record's processes that run but are not proven the job's (left alone), survived: those still
    there at the end, recorder: what became of the recorder, proof: what the run gave to prove membership."""
    run_dir = os.path.abspath(run_dir)
    events = record_events(run_dir)
    marker, recorder = run_marker(run_dir, events), the_recorder(run_dir, events)
    answer = {"stopped": [], "gone": [], "unproven": [], "survived": [], "errors": [], "recorder": None,
              "was_running": job_running(events) and (recorder is not None or marker is not None),
              "proof": {"marker": marker is not None, "recorder": recorder is not None},
              "boot_id": (read_text("/proc/sys/kernel/random/boot_id") or "").strip() or None}
    signalled = {}

    def job_now():
        """The job's processes now (descent counts only while the recorder lives: its pid may be reused)."""
        return members(recorder if recorder and alive(recorder) else None, marker)

    def sweep(sig):
        # the newest first (a child before its parent, as pids mostly go): each rank gets its own signal before
        # torchrun, woken by its own, ends it
        for pid, entry in sorted(job_now().items(), key=lambda kv: -kv[1]["start_ticks"]):
            if pid in signalled and signalled[pid]["signal"] == signal.Signals(sig).name:
                continue
            why_not = send(entry, sig)
            if why_not is None:
                entry = signalled.setdefault(pid, entry)
                entry["signal"] = signal.Signals(sig).name
            elif why_not == "gone":  # it ended between the look and the signal: with its parent, most often
                signalled.setdefault(pid, dict(entry, signal=None))
            else:
                answer["errors"].append({"pid": pid, "cmdline": entry["cmdline"], "error": why_not})

    sweep(signal.SIGTERM)
    deadline = time.monotonic() + max(0.0, grace_s)
    while time.monotonic() < deadline:
        time.sleep(POLL_S)
        sweep(signal.SIGTERM)  # a child started meanwhile (torchrun restarting a rank) is the job's too
        if not any(alive(e) for e in signalled.values()):
            break
    left = [e for e in signalled.values() if alive(e)]
    if left or job_now():
        for e in left:
            if send(e, signal.SIGKILL) is None:
                e["signal"] = "SIGKILL"
        sweep(signal.SIGKILL)
        end = time.monotonic() + KILL_WAIT_S
        while any(alive(e) for e in signalled.values()) and time.monotonic() < end:
            time.sleep(POLL_S)
    answer["recorder"] = end_recorder(recorder)
    answer["stopped"] = sorted(signalled.values(), key=lambda e: e["pid"])
    answer["survived"] = [e for e in answer["stopped"] if alive(e)]
    answer["survived"] += [e for pid, e in sorted(job_now().items()) if pid not in signalled]
    for e in named_in_record(events):
        if e["pid"] in signalled:
            continue
        running = e.get("start_ticks") is not None and proc_start_time(e["pid"]) == e["start_ticks"]
        answer["unproven" if running and alive(e) else "gone"].append(e)
    return answer


def end_recorder(recorder):
    """Wait for the recorder to see its job end and exit; end it (and its stand-in) when it does not. What became
    of it: None (it was not running), "exited", "SIGTERM", "SIGKILL" or "survived"."""
    if recorder is None:
        return None
    end = time.monotonic() + RECORDER_WAIT_S
    while alive(recorder) and time.monotonic() < end:
        time.sleep(POLL_S)
    if not alive(recorder):
        return "exited"
    rec_cmd = cmdline(recorder["pid"])
    stand_ins = [proc_entry(p) for p, parent in processes().items()
                 if parent == recorder["pid"] and cmdline(p) == rec_cmd]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for e in [recorder] + stand_ins:
            send(e, sig)
        end = time.monotonic() + KILL_WAIT_S
        while alive(recorder) and time.monotonic() < end:
            time.sleep(POLL_S)
        if not alive(recorder):
            return signal.Signals(sig).name
    return "survived"


def main(argv):
    """`stop RUN_DIR GRACE_S`: end the run's job; the answer after MARK."""
    if len(argv) != 3:
        sys.stderr.write("usage: stop RUN_DIR GRACE_S\n")
        return 2
    answer = stop(argv[1], float(argv[2]))
    sys.stdout.write(MARK + json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
