"""From evidence to a verdict: rules that map what the recorder saw to a cause id, evidence and a fix.

Each rule reads like a short story: it looks at one kind of evidence, and either says nothing (None) or
gives the verdict. Rules are tried in order; the first that speaks wins, so the specific ones come first
(an OOM kill before "killed by a signal", a FX race before any other traceback).
"""

from __future__ import annotations

import os
import re
import shlex
import signal as _signal
import time
from typing import Callable, Optional

from dfdoctor import causes
from dfdoctor.agent.procfs import is_a_copy, proc_start_time
from dfdoctor.diagnose import download_cache, own_files, ray_driver
from dfdoctor.diagnose import elastic, known_failures, launcher, rules_runtime, torch_pairs, typo
from dfdoctor.diagnose.bad_arguments import config_refused, refused
from dfdoctor.diagnose.config_files import hydra_refused, yaml_broken
from dfdoctor.diagnose.env_rendezvous import env_rendezvous_wait
from dfdoctor.diagnose.spawn_rendezvous import spawn_rendezvous_wait
from dfdoctor.diagnose.value_refused import value_refused
from dfdoctor.diagnose.data_missing import assert_names_missing_data
from dfdoctor.diagnose.blame import blame_fix
from dfdoctor.diagnose.did_nothing import did_nothing, spawned_none
from dfdoctor.diagnose.guardfix import fix_for, is_trainer
from dfdoctor.diagnose.log_is_input import log_is_named
from dfdoctor.diagnose.recorder_lost import recorder_lost
from dfdoctor.diagnose.run_dir_full import run_dir_full
from dfdoctor.diagnose.stopped import offer_stop, stopped_by_user
from dfdoctor.diagnose.unreaped import ended_unreaped
from dfdoctor.diagnose.traceback import PyError, parse_python_error  # noqa: F401 (part of this module's API)
from dfdoctor.model import Verdict
from dfdoctor.run.live import LiveFacts
from dfdoctor.run.record import RunRecord, still_runs
from dfdoctor.targets import Target, transport
from dfdoctor.lazy_re import compile_later

FX_RACE_MARKERS = ("Detected that you are using FX to symbolically trace a dynamo-optimized function",
                   "CURRENT_PATCHER is None")
FATAL_SIGNALS = {"SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "SIGSYS", "SIGTRAP"}
SESSION_SIGNALS = {"SIGHUP", "SIGPIPE"}
SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "busybox"}
SESSION_GRACE_S = 3.0  # a recorder killed this soon after its session ended died with the session


def _meaningful(text: str) -> bool:
    """Output that counts as the job having started logging (warnings printed at import do not)."""
    for line in text.splitlines():
        s = line.strip()
        if s and not line[:1].isspace() and "Warning:" not in s:
            return True
    return False


def _started_logging(run: RunRecord, err: Optional[PyError]) -> bool:
    """Whether the job had written anything of its own before the final traceback."""
    ex = run.exit or {}
    if ex.get("stdout_bytes"):
        return True
    if not run.spawned.get("redirect", True) and run.first("log-grew"):
        return True
    stderr = run.stream("stderr")
    before = err.before if err else stderr
    return _meaningful(before)


def _cmd(run: RunRecord) -> str:
    """The job's command line, shell-quoted."""
    return shlex.join(run.spec.get("argv") or [])


def _python_of(run: RunRecord) -> str:
    """The training interpreter, for fixes that name it."""
    return run.spec.get("python") or "the training interpreter"


def _via_shell(run: RunRecord) -> bool:
    """The command is a shell, whose exit status may encode its child's signal (128+N)."""
    argv = run.spec.get("argv") or [""]
    return argv[0].rsplit("/", 1)[-1] in SHELLS


# ---- rules for a run that never started ---------------------------------------------------------------
def log_could_not_open(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """The recorder could not open --log, so (like the shell's `> LOG`) the job was never started."""
    ev = run.first("log-open-failed")
    if not ev:
        return None
    path, name = ev["path"], ev.get("errname")
    evidence = [f"open({path!r}, O_APPEND|O_CREAT) failed: {name} ({ev.get('strerror')})", "the job was not started"]
    if name == "ENOENT":
        return Verdict("failed", causes.LOG_DIR_MISSING, f"The log's folder {_parent(path)} does not exist, so no log "
                       "could be created and the job never started.", f"mkdir -p {shlex.quote(_parent(path))}", evidence)
    if name in ("ENOSPC", "EDQUOT"):
        return Verdict("failed", causes.DISK_FULL, f"No space is left on the file system of {path}.",
                       f"Free space or inodes there (df -h {_parent(path)}; df -i), or log elsewhere.", evidence)
    return Verdict("failed", causes.LOG_NOT_WRITABLE, f"The log {path} cannot be written ({ev.get('strerror')}).",
                   "Point --log at a writable file: not a folder, on a read-write file system, with write "
                   "permission for the job's user.", evidence)


def spawn_failed(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """exec() of the command itself failed: it does not exist or cannot be executed."""
    ev = run.first("spawn-failed")
    if not ev:
        return None
    what = ev.get("filename") or (ev.get("argv") or ["?"])[0]
    cwd = ev.get("cwd") or run.spec.get("cwd")
    evidence = [f"exec {what!r}: {ev.get('errname')} ({ev.get('strerror')})", f"command: {_cmd(run)}", f"cwd: {cwd}"]
    if cwd and what == cwd:
        return Verdict("failed", causes.COMMAND_NOT_FOUND, f"The job's working directory {cwd} does not exist, so "
                       "its command could not be started.", "Create the folder or pass the right --cwd.", evidence)
    if ev.get("errname") in ("ENOENT", "EACCES", "ENOEXEC", "ENOTDIR", "EISDIR"):
        return Verdict("failed", causes.COMMAND_NOT_FOUND, f"The command {what!r} could not be executed: "
                       f"{ev.get('strerror')}.", "Check the command's spelling and PATH (use an absolute path), "
                       "and that the file is executable (chmod +x) with a valid #! line.", evidence)
    return Verdict("failed", None, f"The job could not be started: {ev.get('strerror')}.",
                   "See the evidence; this is not one of the known causes.", evidence)


# ---- rules for a job that exited --------------------------------------------------------------------
def handed_off(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """The command exited 0 but left its work, and its output pipes, to processes it started (a launcher that
    backgrounds the trainer, a daemon): judge those, not the launcher's quick exit."""
    ex = run.exit
    if not ex or ex.get("exit_code") != 0 or not ex.get("handed_off"):
        return None
    holders = ex["handed_off"]
    who = ", ".join(f"pid {h['pid']} ({h.get('cmdline') or '?'})" for h in holders[:3])
    evidence = [f"the command exited 0 after {ex.get('wall_s')} s; its output pipes stayed open in {who}"]
    ended = run.first("handoff-ended")
    if ended is None:
        at_exit = int(ex.get("stdout_bytes") or 0) + int(ex.get("stderr_bytes") or 0)
        if not run.recorder_alive() or run.output_bytes() <= at_exit:
            return None  # the recorder vanished (recorder_vanished speaks), or nothing works there visibly
        return Verdict("running", None, f"The command handed its work to {who}, which still runs; dfdoctor keeps "
                       "relaying its output.", f"Follow it with `{_follow(run)}`; `dfdoctor status {run.id}` "
                       "diagnoses it again later.", evidence + [f"output so far: {run.output_bytes()} bytes"])
    ends = ended.get("ended") or []
    evidence += [f"pid {e['pid']} ended with " + (f"signal {e['signal']}" if e.get("signal") else
                                                   f"status {e.get('exit_code')}") for e in ends]
    bad = [e for e in ends if e.get("signal") or e.get("exit_code")]
    if not bad:
        seen = "" if ends else " (its exit status was not visible to dfdoctor)"
        return Verdict("ok", None, f"The command handed its work to {who}, which ran to completion after "
                       f"{ended.get('wall_s')} s{seen}.", "", evidence)
    first = bad[0]
    err = parse_python_error(run.stream("stderr"))
    if first.get("signal"):
        return Verdict("failed", causes.KILLED_BY_SIGNAL if first["signal"] in ("SIGKILL", "SIGTERM", "SIGINT")
                       else causes.CRASHED, f"The process the command handed its work to (pid {first['pid']}) died "
                       f"from {first['signal']}.", "See the end of its output in the log and the run folder's "
                       "stderr.log; dmesg may say who sent the signal.", evidence)
    headline = f": {err.headline} at {err.blame}" if err else f" with status {first.get('exit_code')}"
    return Verdict("failed", causes.CRASHED, f"The process the command handed its work to (pid {first['pid']}) "
                   f"crashed{headline}.", "Fix the error at the end of its output (the log, and the run folder's "
                   "stderr.log).", evidence + (list(err.tail) if err else []))


def left_writing(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """The command exited 0 and left a process running that writes its output to a file itself (`nohup python
    train.py > x.log 2>&1 &` in a launcher): that process is the job; where it writes is the verdict."""
    ex = run.exit
    if not ex or ex.get("exit_code") != 0 or ex.get("handed_off") or not ex.get("left_writing"):
        return None
    procs = ex["left_writing"]
    expected = os.path.realpath(run.spec["log"]) if run.spec.get("log") else None
    p = next((p for p in procs if expected in (p.get("stdout"), p.get("stderr"))), procs[0])
    goes = p.get("stdout") or p.get("stderr")
    evidence = [f"the command exited 0 after {ex.get('wall_s')} s", f"pid {p['pid']} ({p['cmdline']}) still ran "
                f"then: stdout -> {p.get('stdout') or 'not a file'}, stderr -> {p.get('stderr') or 'not a file'}"]
    now = launcher.current_command(p["pid"], p.get("start_ticks")) if not run.is_remote else None
    who = f"pid {p['pid']} ({now or p.get('cmdline') or '?'})"
    if _still_runs(run, p):
        if expected and expected in (p.get("stdout"), p.get("stderr")):
            return Verdict("running", None, f"The command handed its work to {who}, which runs and writes "
                           f"{expected} itself.", f"Follow it with `{_follow(run)}`.", evidence)
        fix = f"Follow it with `tail -f {shlex.quote(goes)}`."
        if run.spec.get("log"):
            script = launcher.script_of(run.spec.get("argv") or [], run.spec.get("cwd") or ".")
            line = launcher.redirect_fix(script, goes, run.spec["log"]) if script else None
            if line:
                fix += (f" To have it write {run.spec['log']} as asked, change {script} line {line[0]} from "
                        f"`{line[1]}` to `{line[2]}` (not tried).")
            else:
                fix += f" To have it write {run.spec['log']} as asked, point the launcher's redirect there."
        return Verdict("running", None, f"The command (a launcher) exited 0 and left the job to {who}, which runs "
                       f"and writes its own log, {goes}.", fix, evidence)
    err = launcher.log_error(goes) if goes and not run.is_remote else None
    if err is not None:
        return Verdict("failed", causes.CRASHED, f"The command (a launcher) exited 0 and left the job to pid "
                       f"{p['pid']}, which ended with {err.headline} at {err.where}; its log is {goes}.",
                       f"Fix the error at {err.where} (the end of {goes}).", evidence + list(err.tail))
    return Verdict("unknown", None, f"The command handed its work to {who}, which wrote {goes} itself and has "
                   "ended; dfdoctor did not start it, so how it ended is not known.", f"Read the end of {goes}; "
                   "launch the trainer itself under dfdoctor to have its end recorded.", evidence)


def _still_runs(run: RunRecord, proc: dict) -> bool:
    """Whether a process the recorder noted still runs: checked here (pid and start time); on a target, taken
    as it was when the command exited (the evidence says "then")."""
    if run.is_remote:
        return True
    return still_runs(proc["pid"], proc.get("start_ticks"))


def oom_killed(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """SIGKILL plus a rising OOM counter (or the kernel's own words) means the OOM killer did it."""
    ex = run.exit
    if not ex:
        return None
    killed = ex.get("signal") == "SIGKILL" or (_via_shell(run) and ex.get("exit_code") == 128 + 9)
    before = (ex.get("oom_before") or {}).get("oom_kill")
    after = (ex.get("oom_after") or {}).get("oom_kill")
    rose = before is not None and after is not None and after > before
    if not killed or not (rose or ex.get("kernel")):
        return None
    evidence = [f"the job (pid {ex['pid']}) died from SIGKILL after {ex.get('wall_s')} s"]
    if rose:
        evidence.append(f"oom_kill counter of {ex.get('memory_cgroup')}: {before} before, {after} after")
    evidence += [f"kernel: {line}" for line in ex.get("kernel") or []]
    evidence.append(f"peak resident memory (max RSS): {ex.get('max_rss_kb', 0) / 1024:.0f} MiB")
    limit = run.first("memory-limit")
    if limit:
        evidence.append(f"memory limit set with --memory-limit: {limit['limit'] / 2**20:.0f} MiB")
    return Verdict("failed", causes.OOM_KILLED, "The kernel's out-of-memory killer ended the job.",
                   "Use less memory (smaller batch or model, fewer workers/drafter threads), or give the "
                   "job's cgroup/container more memory.", evidence)


def fx_trace_race(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """The concurrent torch.compile race leaves one of two telltale messages."""
    if not run.exit:
        return None
    stderr = run.stream("stderr", 1 << 20)
    marker = next((m for m in FX_RACE_MARKERS if m in stderr), None)
    if not marker:
        return None
    err = parse_python_error(stderr)
    evidence = list(err.tail) if err else []
    evidence += [f"message: {marker}", _status_line(run.exit)]
    return Verdict("failed", causes.FX_TRACE_RACE, "Several threads ran torch.compile at once and tripped over "
                   "dynamo's process-global FX tracing state.",
                   fix_for(is_trainer(run.spec.get("argv") or [])), evidence)


def command_not_found_status(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """A shell's 127/126, or python's "can't open file", means the command or script is missing."""
    ex = run.exit
    if not ex:
        return None
    stderr = run.stream("stderr")
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    script_missing = "can't open file" in stderr and ex.get("exit_code") == 2
    if not (script_missing or (ex.get("exit_code") in (126, 127) and _via_shell(run))):
        return None
    named = re.search(r"can't open file '([^']+)'", stderr) if script_missing and not run.is_remote else None
    from dfdoctor.diagnose import user_terms  # start-up: the project model, read for a fix alone (issue 45)
    near = user_terms.mistyped_script(named.group(1), list(run.spec.get("argv") or [])) \
        if named and os.path.isabs(named.group(1)) else None
    return Verdict("failed", causes.COMMAND_NOT_FOUND, f"The command or script could not be found or run: {last}",
                   near or "Check the path (relative paths resolve against --cwd), its spelling and that it is "
                   "executable.",
                   [last, _status_line(ex), f"command: {_cmd(run)}", f"cwd: {run.spawned.get('cwd')}"])


def python_exception(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """A Python traceback at the end of stderr names the cause and the line."""
    ex = run.exit
    if not ex or (ex.get("exit_code") in (0, None) and not ex.get("signal")):
        return None
    err = parse_python_error(run.stream("stderr"))
    if not err:
        return None
    return exception_verdict(run, err, [*err.tail, _status_line(ex)], "The job", _started_logging(run, err))


def exception_verdict(run: RunRecord, err: PyError, evidence: list[str], who: str, started: bool) -> Verdict:
    """The verdict for the exception `who` died of: a run-time cause its words prove (rules_runtime), a
    syntax error, a missing module, or a crash before or after the job started logging."""
    from dfdoctor.diagnose import user_terms  # start-up: the project model, read for a fix alone (issue 45)
    seen = _runtime_context(run)
    found = rules_runtime.classify(err, seen) or config_refused(err, seen) or yaml_broken(err, seen) \
        or hydra_refused(f"{err.before}\n{err.text}", seen) or assert_names_missing_data(err, seen) \
        or typo.missing_name(err, seen) or known_failures.classify(err, seen) or value_refused(err, seen)
    if found is not None:
        return Verdict("failed", found.cause, found.summary if who == "The job" else
                       f"{who.rstrip(',')}: {found.summary}",
                       found.fix, [*found.evidence, *evidence])
    if err.exc_type in ("SyntaxError", "IndentationError", "TabError"):
        return Verdict("failed", causes.SYNTAX_ERROR, f"{err.where} does not compile: {err.headline}.",
                       f"Fix the syntax at {err.where}; `python -m py_compile FILE` checks it without running.",
                       evidence)
    module = re.search(r"No module named '([^']+)'", err.message)
    if err.exc_type.endswith(("ModuleNotFoundError", "ImportError")) and module:
        name = module.group(1)
        proj = user_terms.project_of(seen)
        install = proj.install if proj else None
        mistyped = typo.missing_module(err, seen, name, install.declares(name) if install else None, install)
        if mistyped is not None:
            return Verdict("failed", causes.MISSING_MODULE, f"{who} died at start: module {name!r} is not installed "
                           f"in the training interpreter (imported at {err.blame})"
                           + (f": {mistyped[0]}" if mistyped[0] else "."), mistyped[1], evidence)
        return Verdict("failed", causes.MISSING_MODULE, f"{who} died at start: module {name!r} is not installed "
                       f"in the training interpreter (imported at {err.blame}).",
                       (not run.is_remote and torch_pairs.missing_fix(name.split(".")[0], _python_of(run))) or
                       user_terms.module_fix(name, _runtime_context(run)) or
                       f"Install the distribution that provides {name.split('.')[0]!r} into {_python_of(run)} "
                       f"(e.g. {_python_of(run)} -m pip install {name.split('.')[0]}), or fix the import.", evidence)
    evidence = [*err.library_evidence, *evidence]
    if started:
        return Verdict("failed", causes.CRASHED, f"{who} crashed after it started logging: {err.headline} "
                       f"at {err.blame}.", f"{blame_fix(err)} The full traceback is in the log and in the run "
                       "folder's stderr.log.", evidence)
    return Verdict("failed", causes.IMPORT_ERROR, f"{who} died while importing or starting, before it wrote "
                   f"anything: {err.headline} at {err.blame}.",
                   f"{blame_fix(err)} If it is raised while importing, `dfdoctor check` "
                   "shows it too (imports.smoke imports the script's modules without running the script).",
                   evidence)


def _runtime_context(run: RunRecord) -> rules_runtime.Context:
    """What the run-time readers may look at: the output (stderr, and stdout where trainers print what they
    fetch), the command, the job's environment, where it ran."""
    return rules_runtime.Context(output=run.stream("stderr", 1 << 20), argv=list(run.spec.get("argv") or []),
                                 env=dict((run.spawned or {}).get("env") or {}), local=not run.is_remote,
                                 cwd=run.spec.get("cwd"), python=run.spec.get("python"),
                                 stdout=run.stream("stdout", 1 << 20))


def elastic_rank_failed(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """torchrun (or accelerate) reported a failed worker: the verdict is that rank's, not the agent's
    ChildFailedError."""
    ex = run.exit
    if not ex or ex.get("exit_code") in (0, None):
        return None
    stderr = run.stream("stderr", 1 << 20)
    if not elastic.is_elastic(stderr):
        return None
    row = elastic.root_cause(stderr)
    err, source = elastic.rank_error(stderr, row)
    rank = row.rank if row and row.rank is not None else (elastic.ranks_with_traceback(stderr) or [None])[0]
    who = row.who if row else f"rank {rank}" if rank is not None else "a worker"
    how = row.how if row else "an unknown exit"
    evidence = [f"torchrun's first observed failure: {who}, {how}" if row else
                "torchrun printed no root-cause table; the first rank with a traceback is taken"]
    cause = elastic.behind_a_casualty(stderr, row, err)
    if cause is not None:  # the first rank torchrun saw end only lost its peer: the peer's own error is the cause
        evidence.append(f"{who} only lost its peer ({err.headline[:160]}); {cause[0].who} raised its own error")
        row, err, source = cause
        # torchrun ends the ranks still running once one failed: that SIGTERM is not how this one failed
        who, how = row.who, (f"{err.exc_type}, then {row.signal} from torchrun" if row.signal else row.how)
    if row and row.signal and cause is None:
        if not (row.signal in FATAL_SIGNALS and err is not None and elastic.from_the_rank(source)):
            return _rank_signal_verdict(run, row, evidence + [_status_line(ex)])
        # The rank raised first and faulted while exiting (a process group torn down at interpreter exit,
        # an atexit hook): its exception is the cause, the signal only how the process ended.
        evidence.append(f"{who} printed this exception before it died with {row.signal}; the signal came while "
                        "it was exiting")
        how = f"{err.exc_type}, then {row.signal} while exiting"
    if err is None:
        told = refused(elastic.before_agent(stderr), _runtime_context(run), _status_line(ex)) \
            if row and row.exitcode == 2 else None
        if told is not None:  # the rank's own parser refused the command (argparse exits 2)
            told.evidence.insert(0, evidence[0])
            return told
        hint = ("" if row and row.error_file else " Decorate the entry point with @record (from "
                "torch.distributed.elastic.multiprocessing.errors import record) so torchrun keeps its traceback.")
        last = [l for l in elastic.before_agent(stderr).splitlines() if l.strip() and not _AGENT_LINE.match(l)]
        missing = next((l for l in last if "can't open file" in l), None)
        if missing:
            return Verdict("failed", causes.COMMAND_NOT_FOUND, f"{who.capitalize()} could not start its script: "
                           f"{missing}", "Check the script's path (relative paths resolve against --cwd) and its "
                           "spelling.", evidence + [missing, _status_line(ex)])
        return Verdict("failed", causes.CRASHED, f"{who.capitalize()} failed first, with {how}; no traceback of "
                       "its own is in the output.", "Read that rank's output in the log." + hint,
                       evidence + [f"last output before torchrun's report: {l}" for l in last[-3:]]
                       + [_status_line(ex)])
    evidence += [f"its exception, from {source}:", *err.tail, _status_line(ex)]
    started = _meaningful("\n".join(l for l in stderr.splitlines() if not _AGENT_LINE.match(l))) or \
        bool(ex.get("stdout_bytes"))
    verdict = exception_verdict(run, err, evidence, f"{who.capitalize()}, the first to fail ({how}),", started)
    return verdict


_AGENT_LINE = compile_later(r"^(?:[WEI]\d{4} |\[rank\d+\]:|Traceback|  File |    |torch\.distributed\.elastic|=+$|-+$)")


def _rank_signal_verdict(run: RunRecord, row: "elastic.RankFailure", evidence: list[str]) -> Verdict:
    """A rank that died from a signal: the OOM killer, a fatal fault, or a kill from outside."""
    ex = run.exit or {}
    before = (ex.get("oom_before") or {}).get("oom_kill")
    after = (ex.get("oom_after") or {}).get("oom_kill")
    who = row.who.capitalize()
    if row.signal == "SIGKILL" and before is not None and after is not None and after > before:
        return Verdict("failed", causes.OOM_KILLED, f"{who} was killed by the kernel's out-of-memory killer.",
                       "Use less host memory per rank (smaller batches, fewer DataLoader workers), or give the "
                       "job's cgroup/container more memory.",
                       evidence + [f"oom_kill counter of {ex.get('memory_cgroup')}: {before} before, {after} after"])
    if row.signal in FATAL_SIGNALS:
        return Verdict("failed", causes.CRASHED, f"{who} crashed with {row.signal}.", "A native extension or "
                       "the interpreter faulted in that rank: run it with `python -X faulthandler` to see the "
                       "Python stack at the fault.", evidence)
    return Verdict("failed", causes.KILLED_BY_SIGNAL, f"{who} was killed by {row.signal}; the other ranks were "
                   "stopped by torchrun after it.", "Find who sends it: the kernel's OOM killer (dmesg), a "
                   "scheduler's limit, a watchdog, or a user's kill.", evidence)


def died_from_signal(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """A death by signal: the session's signals, a fatal fault, or a kill nothing else explains."""
    ex = run.exit
    if not ex:
        return None
    name = ex.get("signal")
    if not name and _via_shell(run) and 128 < (ex.get("exit_code") or 0) < 128 + 65:
        name = _signame(ex["exit_code"] - 128)
    if not name:
        return None
    evidence = [_status_line(ex)]
    got = run.all("signal")
    evidence += [f"the recorder received {s['signal']}" + (" and passed it on to the job" if s.get("forwarded")
                 else "") for s in got]
    tail = [l for l in run.stream("stderr").strip().splitlines()[-3:] if l.strip()]
    evidence += [f"last stderr line: {l}" for l in tail[-1:]]
    if name in SESSION_SIGNALS:
        return Verdict("failed", causes.KILLED_ON_SESSION_EXIT, f"The job died from {name}: the terminal or "
                       "session it was tied to went away.", "Launch with `dfdoctor launch` (it detaches "
                       "properly), or ignore SIGHUP and detach: `setsid -f nohup CMD > LOG 2>&1 < /dev/null`.",
                       evidence)
    if name in FATAL_SIGNALS:
        return Verdict("failed", causes.CRASHED, f"The job crashed with {name}"
                       + (" (core dumped)." if ex.get("core_dumped") else "."),
                       "A native extension or the interpreter faulted: run it with `python -X faulthandler` to "
                       "see the Python stack at the fault, and check the versions of compiled packages.", evidence)
    forwarded = [s["signal"] for s in got if s.get("forwarded")]
    why = f" after someone sent {forwarded[-1]} to its recorder" if forwarded else ""
    return Verdict("failed", causes.KILLED_BY_SIGNAL, f"The job was killed by {name}{why}; nothing here "
                   "(no OOM kill, no session end) explains it.", "Find who sends it: a scheduler's time or "
                   "memory limit, a watchdog, or a user's kill; the kernel log (dmesg) may say.", evidence)


def exited_cleanly(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """Status 0: finished (it wrote something) or exited early (it wrote nothing at all)."""
    ex = run.exit
    if not ex or ex.get("exit_code") != 0:
        return None
    wrote = _wrote_own_output(run)
    elsewhere = _elsewhere_in_record(run)
    if not wrote and elsewhere:
        return own_files.finished_with_its_own_log(run, _status_line(ex)) or Verdict("failed", causes.LOG_ELSEWHERE, f"The job exited with status 0 after {ex.get('wall_s')} s; "
                       f"its output went to {elsewhere[0]}, not to {run.spec.get('log') or 'the expected log'}.",
                       _ELSEWHERE_FIX, [_status_line(ex), *[f"seen while it ran: {w}" for w in elsewhere]])
    if wrote:
        return did_nothing(run) or Verdict("ok", None, f"The job ran to completion (exit status 0 after {ex.get('wall_s')} s).",
                       "", [_status_line(ex), f"output: {run.output_bytes()} bytes"])
    only = " but warnings" if run.output_bytes() else ""
    return spawned_none(run) or Verdict("failed", causes.EXITED_EARLY, f"The job exited with status 0 after {ex.get('wall_s')} s "
                   f"without writing anything{only}.", "Make sure the script calls its entry point (an "
                   "`if __name__ == \"__main__\": main()` block) and that the command runs the right file.",
                   [_status_line(ex), "stdout was empty; stderr held only warnings" if only else
                    "stdout and stderr were empty", f"command: {_cmd(run)}",
                    *[f"stderr: {l}" for l in run.stream("stderr").strip().splitlines()[:3]]])


def exited_nonzero(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """A non-zero status with no traceback: the job reported failure its own way."""
    ex = run.exit
    if not ex or not ex.get("exit_code"):
        return None
    tail = [l for l in run.stream("stderr").strip().splitlines() + run.stream("stdout").strip().splitlines() if l.strip()]
    return (ex.get("exit_code") == 2 and refused(run.stream("stderr"), _runtime_context(run), _status_line(ex))) \
        or _said_by_hydra(run) \
        or Verdict("failed", causes.CRASHED, f"The job exited with status {ex['exit_code']} after {ex.get('wall_s')} s"
                   + ("." if tail else " without writing anything."),
                   "Read the end of the log; run the command by hand in its cwd to see what it reports.",
                   [_status_line(ex), *[f"last output: {l}" for l in tail[-2:]]])


def spawned_rendezvous(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """Processes started without torchrun waiting in init_process_group's tcp:// rendezvous (spawn_rendezvous)."""
    ctx = _runtime_context(run)
    return spawn_rendezvous_wait(run, live, ctx) or env_rendezvous_wait(run, live, ctx)


def _said_by_hydra(run: RunRecord) -> Optional[Verdict]:
    """Hydra's refusal of an override, printed without a traceback (status 1), in its own words."""
    found = hydra_refused(run.stream("stderr"), _runtime_context(run))
    return Verdict("failed", found.cause, found.summary, found.fix, [*found.evidence, _status_line(run.exit)]) \
        if found else None


# ---- rules for a recorder that vanished ---------------------------------------------------------------
def recorder_vanished(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """No exit record and no recorder: it was killed hard; find what the timing supports."""
    if run.finished or live is not None or run.recorder_alive() or not run.recorder:
        return None
    hb = (run.heartbeat or {}).get("t") or run.recorder["t"]
    evidence = [f"the recorder (pid {run.recorder['pid']}) is gone without writing the job's exit",
                f"its last heartbeat: {_clock(hb)}"]
    stand_in = run.first("stand-in")
    if stand_in:  # in a group of its own since round 3: a kill of the recorder's group leaves it to say so
        evidence.append(f"its stand-in (pid {stand_in.get('pid')}) is gone too, without noting the loss: both were "
                        "killed at once (the whole tree, or the two by pid); a job that outlived them would have "
                        "died at its next print, of its broken output pipe")
    if run.job_alive():
        return Verdict("running", None, "The job still runs, but its recorder was killed: its output is no longer "
                       "copied to the log.", "Relaunch with `dfdoctor launch` if you need its output.", evidence)
    boot = run.boot_id()
    if run.recorder.get("boot_id") and boot and boot != run.recorder["boot_id"]:
        return Verdict("failed", causes.KILLED_BY_SIGNAL, "The machine rebooted while the job ran; the job and its "
                       "recorder died with it.", "Relaunch the job; look at the host's logs for why it rebooted.",
                       evidence + ["the boot id changed since the launch"])
    ends = [(e["t"], f"the launching {e.get('role')} (pid {e.get('pid')}) ended") for e in run.all("launcher-gone")
            if e.get("role") == "session"]
    returned = [(e["t"], "dfdoctor launch returned to the launching session") for e in run.launcher
                if e["event"] == "detached"]
    if _launcher_led_its_session(run):  # its return was the session's end; else the session is watched above
        ends += returned
    if run.is_remote:  # on a target, the session that matters is the one that started the recorder there
        ends += [(e["t"], f"the session that started it on {run.spec.get('target')} ended") for e in run.launcher
                 if e["event"] == "launched"]
    def at_last_beat(t: float) -> bool:  # an end this close to the last heartbeat may have been what killed them
        return -1.5 <= hb - t <= SESSION_GRACE_S

    near = [(t, what) for t, what in ends if at_last_beat(t)]
    if near and _session_lives(run):
        near = []  # dfdoctor returned, but the session that launched it still runs: no session end killed them
        evidence.append("the session that launched them still runs: no session end killed them (killed by pid)")
    elif not near and not run.is_remote and any(at_last_beat(t) for t, _ in returned):
        sid = (run.spec.get("launcher") or {}).get("sid")
        where = " (its leader lies outside this PID namespace)" if sid == 0 else ""
        evidence.append(f"dfdoctor launch returned then, but it did not lead its session {sid}{where} and no end "
                        "of that session was seen: no session end killed them (killed by pid)")
    if near:
        t, what = min(near)
        evidence.append(f"{what} at {_clock(t)}, {hb - t:+.1f} s from the last heartbeat")
        return Verdict("failed", causes.KILLED_ON_SESSION_EXIT, "The job and its recorder were killed when the "
                       "session that launched them ended (a session- or cgroup-wide kill, which no detaching "
                       "escapes).", _handoff_fix(run.target) if run.is_remote else
                       "Keep the session open, or start the job outside it: a systemd unit "
                       "(systemd-run --unit train ...), tmux on the host, or `pct exec` with a service inside "
                       "the container; with logind, KillUserProcesses=no.", evidence)
    who = ("The recorder and its stand-in were killed hard (SIGKILL or a cgroup kill) at about the time of the "
           "last heartbeat, and the job is gone: killed with them, or dead of its broken output pipe at its next "
           "print" if stand_in else "The job and its recorder were killed hard (SIGKILL or a cgroup kill) at about "
           "the time of the last heartbeat")
    return Verdict("failed", causes.KILLED_BY_SIGNAL, who + "; the launching session was not ending then.", "Find who kills whole process trees here: a scheduler, an OOM daemon (systemd-oomd, "
                   "earlyoom), or a user's kill -9; check dmesg and the journal around that time.", evidence)


# ---- rules for a job alive at the end of the watch -----------------------------------------------------
def log_write_failed(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """The log opened, but writing to it failed later (a full disk): the job runs, its log stopped."""
    ev = run.first("log-write-failed")
    if not ev or (run.exit and run.exit.get("exit_code") not in (0, None)):
        return None
    path = run.spec.get("log")
    evidence = [f"write to {path} failed: {ev.get('errname')} ({ev.get('strerror')}) at {_clock(ev['t'])}",
                f"output since then is only in the run folder: {run.dir / 'stdout.log'}"]
    state = "failed"
    if ev.get("errname") in ("ENOSPC", "EDQUOT"):
        return Verdict(state, causes.DISK_FULL, f"The file system of {path} is full: the log stopped growing "
                       "while the job went on.", f"Free space or inodes there (df -h {_parent(path)}; df -i), "
                       "or log elsewhere.", evidence)
    return Verdict(state, causes.LOG_NOT_WRITABLE, f"Writing the log {path} failed ({ev.get('strerror')}).",
                   "Point --log at a writable file on a healthy file system.", evidence)


def running(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """Alive and its log keeps growing: that is what a healthy launch looks like."""
    if live is None or not live.growing:
        return None
    return Verdict("running", None, f"The job is running and its log is growing (pid {live.pid}).",
                   f"Follow it with `{_follow(run)}`; "
                   f"`dfdoctor status {run.id}` diagnoses it again later.",
                   [_ages(run, live), f"output so far: {run.output_bytes()} bytes"] + live.notes)


def _follow(run: RunRecord) -> str:
    """The line that follows the job's log, typed where the user is (through ssh/pct for a remote run)."""
    if not run.is_remote:
        return f"tail -f {shlex.quote(str(run.spec.get('log') or run.dir / 'stdout.log'))}"
    log = run.spec.get("log") or f"{run.spec.get('remote_dir')}/stdout.log"
    return transport.typed_line(run.target, f"tail -f {shlex.quote(log)}")


def deadlock_in_stacks(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """The stack classifier (diagnose/stackclass.py) recognised a known lock cycle in the live job's stacks."""
    if live is None or not live.classified:
        return None
    cause, headline = live.classified
    since = []
    if live.stuck_since is not None:
        since = [f"stuck since {_clock(live.stuck_since)} (the same lock cycle in every stack sample since; "
                 f"at least {max(0.0, live.observed_at - live.stuck_since):.0f} s)"]
    return Verdict("failed", cause, f"{headline}.", fix_for(is_trainer(run.spec.get("argv") or [])),
                   since + live.cycle_detail + _stack_evidence(live))


def stuck_in_stacks(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """The stacks of all the job's processes, looked at twice, prove a wait: a rank missing, a collective
    another rank skipped, a DataLoader worker, stdin, a file lock, a timer, a socket (diagnose/stuck.py)."""
    if live is None or live.stuck is None:
        return None
    f = live.stuck
    if f.cause == causes.SLEEPING:  # where its code says: nothing shows it broken
        return silent(run, live)
    quiet = [f"no output for {live.quiet_s:.0f} s; the job {live.rhythm}"] if live.quiet_s is not None else []
    stop = [f"to stop the whole job, each process proven the run's first: `dfdoctor stop {run.id}`"]
    err = parse_python_error(run.stream("stderr")) if f.cause == causes.WORKERS_DIED else None
    if err is not None:  # the workers' own traceback says what they died of
        v = exception_verdict(run, err, [*err.tail, *f.lines], "A worker of the job", _started_logging(run, err))
        return Verdict("failed", v.cause, f"{f.headline}. {v.summary}", v.fix, quiet + v.evidence + stop)
    # a library's own download cache (tiktoken's) as the job's recorded environment had it
    fix, cache = download_cache.for_the_job(f.fix, (run.spawned or {}).get("env") or {})
    return Verdict(f.state, f.cause, f"{f.headline}.", fix, quiet + cache + f.lines + stop + live.notes)


def log_elsewhere(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """The job writes, but to another file than the expected log."""
    if live is None or not (live.other_logs or live.stdout_targets):
        return None
    where = [f"pid {pid} fd {fd} -> {target}" for pid, fd, target in live.stdout_targets]
    where += [f"pid {pid} has {path} open for writing ({size} bytes)" for pid, path, size in live.other_logs]
    dest = live.stdout_targets[0][2] if live.stdout_targets else live.other_logs[0][1]
    if not run.spec.get("log"):
        # no --log: no file was expected, and one the job writes is its log, not a fault; unseen growing (a job
        # that writes less often than the look lasts), its progress is what was not established (round 14)
        return Verdict("unknown", None, f"The job runs and writes {dest} itself; that file did not grow while the "
                       "job was looked at, so its progress was not established.",
                       f"Follow it: `tail -f {dest}`; `dfdoctor status --watch 30` looks again.", where)
    return Verdict("failed", causes.LOG_ELSEWHERE, f"The job runs, but its output goes to {dest}, not to "
                   f"{run.spec.get('log') or 'the expected log'}.", _ELSEWHERE_FIX, where)


def grows_beside_the_log(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """--log given and still empty while a file the job writes itself grew as we looked: `log-elsewhere` before
    its stacks are read (they show a job between its lines, "silent", while it writes at its pace elsewhere)."""
    if live is None or not live.grew or not run.spec.get("log") or _written(run) > 0:
        return None
    v = log_elsewhere(run, live)
    grew = [f"{path} grew by {n} bytes in {s:g} s while its processes were looked at (the job runs; --log "
            f"{run.spec.get('log')} stays empty)" for path, (_, n, s) in live.grew.items()]
    return v and Verdict(v.state, v.cause, v.summary, v.fix, grew + v.evidence)


def output_buffered(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """A busy Python job whose redirected stdout sits in its block buffer: the log stays empty. Where its
    processes were sampled, a buffered one must be seen working (moving between the looks): one that waits in
    the same place (for its child, a socket, a timer) has nothing in its buffer to explain its silence."""
    if live is None or not live.buffered or _written(run) > 0:
        return None
    from dfdoctor.diagnose import silence, stuck  # start-up: read for a look alone (issue 45)
    if silence.in_import(live.stacks):
        return None
    if live.job and not any(s.proc.python and s.proc.buffered and not s.steady for s in stuck.seen(live.job)):
        return None
    return Verdict("failed", causes.OUTPUT_BUFFERED, f"The job runs (pid {live.pid}) but its log is still empty "
                   f"after {_seconds(_silent_s(run, live))}: Python block-buffers stdout when it is not a terminal.",
                   "Run Python with -u or set PYTHONUNBUFFERED=1 (or print(..., flush=True)).",
                   [_ages(run, live),
                    "stdout is a pipe/file, not a terminal; no -u, no PYTHONUNBUFFERED",
                    *_stack_evidence(live)[:8]])


def stalled_after_logging(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """Alive, wrote something, then went quiet: still running as far as we can tell."""
    if live is None or _written(run) == 0:
        return None
    from dfdoctor.diagnose import stuck  # start-up: read for a look alone (issue 45)
    if live.unsettled and live.unsettled != "not looked at yet":
        return Verdict("unknown", None, f"The job is alive (pid {live.pid}) but not settled after "
                       f"{live.watched_s:.0f} s: {live.unsettled}.", f"`dfdoctor status {run.id}` looks again.",
                       [f"the job {live.rhythm}", *[line for s in stuck.seen(live.job) for line in stuck.excerpt(s)],
                        *live.notes])
    # (CPU whose stack no look could read is not counted: it may be a wait that spins; silent() says so)
    busy = [s.proc for s in stuck.seen(live.job) if s.proc.python and (s.proc.cpu_spent() or 0.0) > 0.3 and
            not s.unread_python]
    if live.job and live.quiet and busy:  # silent but computing: a slow step, an evaluation; not a wait
        return Verdict("running", None, f"The job is running (pid {live.pid}): {len(busy)} of its processes are "
                       f"working on the CPU, though it wrote nothing for {live.quiet_s:.0f} s.",
                       f"Follow it with `{_follow(run)}`; `dfdoctor status {run.id}` looks again.",
                       [f"the job {live.rhythm}", *[line for s in stuck.seen(live.job) for line in stuck.excerpt(s)],
                        *live.notes])
    if live.quiet:  # every process sampled; none showed a wait it could prove: say where it is
        return silent(run, live)
    return Verdict("running", None, f"The job is running (pid {live.pid}); it wrote {_written(run)} bytes, "
                   "though its log did not grow lately.",
                   f"Follow it with `dfdoctor status {run.id}`; if it stays quiet, look at its stacks (py-spy dump "
                   f"--pid {live.pid}).", [_ages(run, live), *_stack_evidence(live)[:12]])


def import_hang(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """Alive, silent, inside an import: stuck before it wrote anything. The stacks say where. Only an import
    that a stack shows is one (`sleep 30`, a quiet rsync, a job waiting for its children are not)."""
    if live is None:
        return None
    from dfdoctor.diagnose import silence, stuck  # start-up: read for a look alone (issue 45)
    if not silence.in_import(live.stacks) or stuck.progress(stuck.seen(live.job)):
        return None  # (one that moves is importing: torch.compile imports as it goes, a loaded machine is slow)
    where = _innermost(live)
    return Verdict("failed", causes.IMPORT_HANG, f"The job is alive (pid {live.pid}) but has written nothing in "
                   f"the {_seconds(_silent_s(run, live))} since its start" + (f"; it waits in {where}." if where else "."),
                   "Look at the stacks: a hanging import, CUDA/NCCL init or a lock. Fix what the innermost "
                   "frame waits on; `dfdoctor check` runs the imports alone with a timeout.",
                   [_ages(run, live), *_stack_evidence(live)])


def silent(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """A live job that is silent and that nothing shows to be broken: running, with where it is, for how long
    it has been silent, and whether its output waits in a block buffer (`sleeping` when it sleeps where its
    code says). A failure is only what a look proves; this is a report of where it is."""
    if live is None:
        return None
    from dfdoctor.diagnose import silence, stuck  # start-up: read for a look alone (issue 45)
    at = silence.place(live.job, live.stacks, run.spec.get("cwd"))
    hb = run.heartbeat or {}
    buffered = (live.buffered or any(p.buffered for p in live.job)) and not hb.get("stdout_flushed")
    quiet = _silent_s(run, live)
    wrote = _written(run) > 0
    where = f": {at.words}" if at is not None else ""
    summary = (f"The job is running (pid {live.pid}) but silent: " + (f"no line for {_seconds(quiet)}" if wrote else
               f"nothing written in the {_seconds(quiet)} since its start") + f"{where}." +
               (" Its output is block-buffered: what it printed may still wait in its buffer." if buffered else ""))
    evidence = [_ages(run, live)]
    if buffered:
        evidence.append("its output is block-buffered: Python without -u or PYTHONUNBUFFERED, stdout not a terminal")
    elif live.python:
        evidence.append("its output is not held in a block buffer (-u, PYTHONUNBUFFERED or flushed lines)")
    if at is not None and not at.python:
        evidence.append("the process it waits in is not Python: its stack cannot be read, the kernel says what "
                        "it waits on")
    evidence += [line for s in stuck.seen(live.job) for line in stuck.excerpt(s)] or _stack_evidence(live)[:12]
    fix = (f"Nothing that dfdoctor can see is broken: it waits where its code says. `dfdoctor status {run.id}` "
           "looks again" + ("; run Python with -u (or PYTHONUNBUFFERED=1) to see each line as it is printed "
                            "(not tried)." if buffered else "."))
    moved = stuck.progress(stuck.seen(live.job))
    if moved and not (at is not None and at.sleeping):  # progress seen, not a wait: say so, not where it waits
        summary = (f"The job is running (pid {live.pid}) and silent for {_seconds(quiet)}, but it makes progress: "
                   f"{moved[0].split(': ', 1)[-1]}.")
        fix = f"Nothing that dfdoctor can see is broken: it works without printing. `dfdoctor status {run.id}` " \
            "looks again."
    if at is not None and at.sleeping or moved or not live.quiet:  # asleep where its code says, seen to move,
        # or silent no longer than its rhythm allows (--watch 0 did not look): nothing says otherwise
        return Verdict("running", causes.SLEEPING if at is not None and at.sleeping else None, summary, fix,
                       moved + evidence + live.notes)
    # running is earned: silent past its rhythm and nothing seen to move (no stack changed, no CPU spent), or
    # CPU spent where no stack says whether it is work or a spinning wait
    unread = [w for w in (s.cpu_unread() for s in stuck.seen(live.job)) if w]
    still = ("; it spends CPU, but its stacks could not be read, so whether it works or spins in a wait is not "
             "established" if unread else
             "; nothing moved between two looks (no stack changed, no CPU spent), and dfdoctor cannot tell whether "
             "that wait ends")
    return Verdict("unknown", None, summary.replace(f"The job is running (pid {live.pid}) but silent",
                                                    f"The job is alive (pid {live.pid}) but silent", 1).rstrip(".") +
                   still + ".", f"Look at what it waits on (below); `dfdoctor status {run.id}` looks "
                   "again, and `dfdoctor stop` ends it." + (" Run Python with -u (or PYTHONUNBUFFERED=1) to see "
                                                         "each line as it is printed (not tried)." if buffered else ""),
                   unread + evidence + ([] if live.job else ["its stacks could not be looked at (py-spy)"]) +
                   live.notes)


def recorder_lost_at_start(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """On a target, the recorder was started and the starting session returned cleanly, yet it never wrote a
    word and left no error: the end of that session killed it (a session that kills everything it started)."""
    launched = next((e for e in run.launcher if e["event"] == "launched"), None)
    if not run.is_remote or run.recorder is not None or not launched or launched.get("error") or \
            (run.remote or {}).get("error") or _recorder_output(run):
        return None
    target, strategy = run.target, launched.get("strategy")
    pid = f" (pid {launched['recorder_pid']} there)" if launched.get("recorder_pid") else ""
    return Verdict("failed", causes.KILLED_ON_SESSION_EXIT, f"The recorder was started detached on {target}{pid}, "
                   "but it was gone before it wrote a word: the end of the starting session killed it, and the "
                   "job with it (a session that kills everything it started: a PID namespace or a cgroup kill).",
                   _handoff_fix(target),
                   [f"started with strategy {strategy}; the starting session returned after "
                    f"{launched.get('session_s')} s without an error",
                    f"{run.spec.get('remote_dir')}/record.jsonl on the target: empty; recorder.out: empty"])


def _launcher_led_its_session(run: RunRecord) -> bool:
    """Whether `dfdoctor launch` was its session's leader (`ssh HOST dfdoctor launch ...`, `setsid`), so that its
    return ended the session. Launched from a session it did not lead, the session's end is what the recorder
    watched (launcher-gone); one it could not watch (sid 0: the leader lies outside this PID namespace, as under a
    container's exec agent; sid 1: init's own) did not end when dfdoctor returned (CI's rounds 12 and 13)."""
    launcher = run.spec.get("launcher") or {}
    if "sid" not in launcher:
        return True  # a record older than the launcher facts: its return is all that dates the session
    return launcher.get("sid") == launcher.get("pid")


def _session_lives(run: RunRecord) -> bool:
    """Whether the session that launched a run on this machine still runs now (the same process, by its start
    time): the recorder and its stand-in killed then by pid are not a session's end (round 2's N15)."""
    if run.is_remote:
        return False
    if (run.spec.get("launcher") or {}).get("sid") == 1:
        return True  # launched from init's own session (a CI runner, a container's entry point): it never ends
    return any(w.get("role") == "session" and w.get("start_ticks") is not None
               and proc_start_time(w["pid"]) == w["start_ticks"] for w in run.spec.get("watch_pids") or [])


def _handoff_fix(target: Target) -> str:
    """What to do when a target's sessions kill everything they started."""
    return ("Hand the job to a daemon that runs outside the session: `--strategy tmux` with a tmux server already "
            "running there, or systemd-run where systemd is PID 1; `dfdoctor check --target "
            f"{target} --only persistence.session` finds which survives there.")


def _recorder_output(run: RunRecord) -> list[str]:
    """The last lines the recorder printed on its own stderr (recorder.out), if any."""
    try:
        return (run.dir / "recorder.out").read_text(errors="replace").strip().splitlines()[-5:]
    except OSError:
        return []


def recorder_never_started(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """The recorder itself did not start: nothing about the job is known; say what the recorder printed."""
    if run.recorder is not None:
        return None
    out = _recorder_output(run)
    return Verdict("unknown", None, "dfdoctor's recorder did not start, so the job was not started either.",
                   "Check that the training interpreter runs (`PYTHON -c pass`); this is likely a dfdoctor bug.",
                   [f"recorder output: {line}" for line in out] or ["the recorder wrote nothing"])


def target_unreachable(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """A run on a --target whose record could not be read there just now: nothing new is known about it."""
    if not run.is_remote or run.finished or not (run.remote or {}).get("error"):
        return None
    return Verdict("unknown", None, f"The run's record on {run.spec.get('target')} could not be read just now, "
                   "so it is not known whether the job still runs.",
                   f"Check that the target answers (`dfdoctor check --target {run.spec.get('target')} --only "
                   f"target.reachable`), then `dfdoctor status {run.id}`.",
                   [f"reading {run.spec.get('remote_dir')} there: {run.remote['error']}"])


def copied_run_folder(run: RunRecord, live: Optional[LiveFacts]) -> Optional[Verdict]:
    """A run folder copied with its project (`cp -a expA expB`) while the job ran: every byte and name is the
    original's, never the folder (its inode), so the job and its recorder are not this folder's to judge. Said
    as such, not as a recorder killed hard."""
    sp = run.spawned
    if run.is_remote or run.finished or not is_a_copy(sp, str(run.dir)):
        return None
    return Verdict("unknown", None, f"This run folder is a copy of the one its recorder writes (the job was "
                   f"started in {sp.get('cwd')}): this copy cannot say how the job is now.",
                   f"Run `dfdoctor status --cwd {sp.get('cwd')}` (the original project) for the live job.",
                   [f"{run.dir} is not the folder the recorder wrote into (another device/inode: a copy, not a "
                    "move); its record stops where the copy was made"])


RULES: list[Callable[[RunRecord, Optional[LiveFacts]], Optional[Verdict]]] = [
    target_unreachable, copied_run_folder, stopped_by_user,
    recorder_lost_at_start, recorder_never_started, log_is_named, log_could_not_open, spawn_failed,
    handed_off, left_writing, oom_killed, fx_trace_race, command_not_found_status, elastic_rank_failed,
    python_exception, died_from_signal, ray_driver.wrong_cluster,
    log_write_failed, exited_cleanly, exited_nonzero,
    run_dir_full, recorder_lost,
    recorder_vanished, ended_unreaped,
    spawned_rendezvous, running, elastic.rendezvous_wait, deadlock_in_stacks, own_files.grows_its_own_log,
    grows_beside_the_log, stuck_in_stacks, log_elsewhere, output_buffered,
    stalled_after_logging, import_hang, silent,
]


def diagnose(run: RunRecord, live: Optional[LiveFacts] = None) -> Verdict:
    """The verdict of the first rule that speaks; `unknown` when none does."""
    for rule in RULES:
        verdict = rule(run, live)
        if verdict is not None:
            return offer_stop(ray_driver.with_evidence(verdict, run), run.id)  # a Ray driver: which cluster
    return Verdict("unknown", None, "dfdoctor could not tell what happened to this run.",
                   f"Look in the run folder {run.dir} (record.jsonl, stderr.log).",
                   [f"events: {', '.join(e['event'] for e in run.events[-8:])}"])


_ELSEWHERE_FIX = ("Remove the redirect or `exec >` inside the command (or a logging FileHandler), or point --log "
                  "at where it really writes; with ssh/pct, quote the whole command so the redirect runs inside "
                  "the container.")


def _elsewhere_in_record(run: RunRecord) -> list[str]:
    """Where the recorder saw the job's output go, other than to us: 'TARGET (pid P fd N)' lines."""
    seen: list[str] = []
    for ev in run.all("outputs"):
        for pid, fd, target in ev.get("streams") or []:
            seen.append(f"{target} (pid {pid} fd {fd})")
        for pid, target in ev.get("files") or []:
            seen.append(f"{target} (pid {pid} writes it)")
    return list(dict.fromkeys(seen))


# ---- helpers ----------------------------------------------------------------------------------------
def _wrote_own_output(run: RunRecord) -> bool:
    """Whether the job wrote output of its own: anything on stdout or in its own log, or stderr lines that are
    not import-time warnings."""
    if (run.exit or {}).get("stdout_bytes") or _written(run) > run.output_bytes():
        return True
    return _meaningful(run.stream("stderr"))


def _written(run: RunRecord) -> int:
    """Bytes the job wrote: on stdout/stderr, plus what --log grew by beyond what the recorder relayed into it
    (the job writing the log itself: --no-redirect, or a launcher's own `exec python ... > LOG`)."""
    grown = 0
    initial = run.first("log-initial")
    if run.spawned and initial:
        size = (run.exit or {}).get("log_size")
        if size is None:
            size = (run.heartbeat or {}).get("log_size")
        grown = max(0, (size or 0) - (initial.get("size") or 0))
        if run.spawned.get("redirect", True):
            grown = max(0, grown - run.output_bytes())
    return run.output_bytes() + grown


def _now_there(run: RunRecord, live: LiveFacts) -> float:
    """Now on the clock of the job's machine: a target's last heartbeat, or the look's time here."""
    return float((run.heartbeat or {}).get("t") or live.observed_at) if run.is_remote else live.observed_at


def _silent_s(run: RunRecord, live: LiveFacts) -> float:
    """Seconds since the job's last output (since its start when it wrote none): its own log's last change
    counts, as the recorder's relay does; never the length of dfdoctor's own watch."""
    hb = run.heartbeat or {}
    started = (run.spawned or {}).get("t")
    last = hb.get("last_output_t") or started
    log = None if run.is_remote else run.spec.get("log")
    if log and _written(run) > run.output_bytes():  # the job writes that log itself
        try:
            last = max(last or 0.0, os.stat(log).st_mtime)
        except OSError:
            pass
    return max(0.0, _now_there(run, live) - last) if last else 0.0


def _ages(run: RunRecord, live: LiveFacts) -> str:
    """One age, in the user's words: `running for 11 s; last line 1 s ago` (`no line yet` when it wrote none)."""
    started = (run.spawned or {}).get("t")
    ran = f"running for {_seconds(_now_there(run, live) - started)}" if started else f"alive (pid {live.pid})"
    if _written(run) == 0:
        return f"{ran}; no line yet"
    return f"{ran}; last line {_seconds(_silent_s(run, live))} ago"


def _seconds(s: float) -> str:
    """`7 s`, `2 min 05 s`."""
    s = max(0, int(round(s)))
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


def _status_line(ex: dict) -> str:
    """One evidence line: exit status or signal, wall time, peak RSS and CPU."""
    how = f"signal {ex['signal']}" if ex.get("signal") else f"status {ex.get('exit_code')}"
    return (f"exit: {how} after {ex.get('wall_s')} s (pid {ex.get('pid')}, max RSS "
            f"{(ex.get('max_rss_kb') or 0) / 1024:.0f} MiB, CPU {ex.get('utime_s', 0) + ex.get('stime_s', 0):.1f} s)")


def _signame(num: int) -> str:
    """A signal number's name."""
    try:
        return _signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _parent(path: str) -> str:
    """The folder part of a path."""
    return path.rsplit("/", 1)[0] or "/" if "/" in path else "."


def _clock(t: float) -> str:
    """A wall-clock time as HH:MM:SS.d, for evidence lines."""
    import time

    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int((t % 1) * 10)}"


def _stack_evidence(live: LiveFacts) -> list[str]:
    """The live job's stacks as evidence lines (capped per process)."""
    out = []
    for st in live.stacks:
        if st.error:
            out.append(f"stacks of pid {st.pid} from the kernel ({st.error}):")
        out += st.text.splitlines()[:40]
    return out


def _innermost(live: LiveFacts) -> Optional[str]:
    """The innermost frame of the main thread, as py-spy prints it."""
    from dfdoctor.diagnose import stackclass  # start-up: read for a look alone (issue 45)
    for st in live.stacks:
        main = stackclass.main_thread(st.text)
        if main and main.frames:
            return main.frames[0].raw
    return None
