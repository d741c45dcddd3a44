"""`check`, the launch's start and watch (the steps `launch/pipeline.py` asks for), and `status` for an sbatch
submission; the CLI only parses and prints."""

from __future__ import annotations

import fnmatch
import json
import sys
from pathlib import Path
from typing import Any, Optional

from dfdoctor import causes
from dfdoctor.context import Context
from dfdoctor.config import Config, apply_silences
from dfdoctor.engine import check_selection, now_iso, run_phase
from dfdoctor.errors import UsageError
from dfdoctor.launch.report import placed_report as _report, save_report, timeline_event as _event
from dfdoctor.model import CheckRecord, Report, Verdict
from dfdoctor.numbers import is_whole
from dfdoctor.placing_answers import Judged, LaunchAsk, Started
from dfdoctor.safefile import write_atomically
from dfdoctor.unused_log import Instead
from dfdoctor.registry import discover, select
from dfdoctor.run.folder import RunFolder, find_run, new_run
from dfdoctor.run.masks import masked
from dfdoctor.agent.names import LAUNCHER, SPEC
from dfdoctor.diagnose.stopped import offer_stop, stop_note, stopped_verdict
from dfdoctor.run import events
from dfdoctor.slurm import named_output, near, onnode, patterns, precheck, sbatch, session, watch
from dfdoctor.slurm.job import split_exit
from dfdoctor.slurm.job import facts as job_facts
from dfdoctor.slurm.rules import Seen, judge


def sbatch_default_output(sub: sbatch.Submission) -> str:
    return patterns.default_output(bool(sub.get("array")))


def submission_of(ctx: Context) -> sbatch.Submission:
    """The submission a Context names: `-- sbatch ...`, or `--launcher job.sbatch`."""
    return session.submission(ctx)


def _wanted(only: tuple[str, ...], skip: tuple[str, ...]):
    """--only/--skip globs as a filter on the Slurm checks' ids."""
    def hit(cid: str, pats: tuple[str, ...]) -> bool:
        return any(fnmatch.fnmatchcase(cid, p) for p in pats)
    return lambda cid: (not only or hit(cid, only)) and not hit(cid, skip)


# The order a reader follows: what sbatch says, whether the cluster can run it, where it writes, then the rest.
ORDER = ("slurm.submission", "slurm.partition", "slurm.output", "slurm.gpus", "slurm.training")


def check_records(ctx: Context, only: tuple[str, ...] = (), skip: tuple[str, ...] = (),
                  cfg: Optional[Config] = None) -> list[CheckRecord]:
    """`dfdoctor check -- sbatch ...`: the Slurm checks (registered checks of scope "slurm", run by the runner
    like every other: timed out, silenced), then the training command's checks on a node as rows of their own."""
    cfg = cfg or Config()
    checks = discover()[0]
    only, skip = check_selection({"only": only, "skip": skip}, cfg, checks)
    wanted = _wanted(only, skip)
    # slurm.training runs the usual checks on a node: it runs when one of them is wanted, or when --only names
    # it (then all of them, less --skip); `--only 'slurm.*'` is the Slurm checks alone, with no srun of dfdoctor.
    named = "slurm.training" in only and wanted("slurm.training")
    on_node = named or any(wanted(i) for i in precheck.NODE_CHECK_IDS if i != "slurm.training")
    keep = (lambda cid: not any(fnmatch.fnmatchcase(cid, p) for p in skip)) if named else wanted
    chosen = sorted((c for c in select(checks, scope="slurm", phase="pre")
                     if (wanted(c.id) and c.id != "slurm.training") or (c.id == "slurm.training" and on_node)),
                    key=lambda c: (ORDER.index(c.id) if c.id in ORDER else len(ORDER), c.id))
    if any(c.id in ("slurm.submission", "slurm.partition") for c in chosen):
        session.asked(ctx)  # asked once here, so every forked check worker inherits sbatch's answer
    records: list[CheckRecord] = []
    try:
        ran = run_phase(ctx, chosen, "pre", cfg)
    except KeyboardInterrupt:  # the runner killed the check workers, and their srun with them (SIGKILL)
        precheck.cancel_leftovers()
        raise
    if any(r.status.value == "timeout" for r in ran):
        precheck.cancel_leftovers()
    for r in ran:
        inner = (r.data or {}).get("node_records") if r.id == "slurm.training" else None
        if inner:
            records += [rec for rec in map(CheckRecord.from_dict, inner) if keep(rec.id)]
        elif wanted(r.id) or r.id == "slurm.training" or r.status.value not in ("ok", "skip"):
            records.append(r)
    apply_silences(records, cfg.silences)
    return records


def start(ctx: Context, ask: LaunchAsk, timeline: list[dict[str, Any]]) -> Started:
    """Submit with --parsable into a new run folder; sbatch's refusal is the verdict."""
    argv = list(ctx.command) if sbatch.is_sbatch(ctx.command) else ["sbatch", str(ctx.launcher)]
    named = named_output.refused(submission_of(ctx), ctx.cwd)  # checked or not, forced or not: nothing submitted
    if named is not None:
        return Started("", None, refused=named)
    run_id, folder = new_run(ctx.cwd, ask.run_dir)
    RunFolder.at(folder).keep_prints(ctx.env, argv)
    job_id, answer = watch.submit(argv, ctx.cwd, ctx.env)
    timeline.append(_event("submitted", f"job {job_id}" if job_id else f"sbatch refused: {answer.said}"))
    spec: dict[str, Any] = {"run_id": run_id, "argv": argv, "cwd": str(ctx.cwd), "target": "local",
                            "slurm": {"job_id": job_id, "sbatch": answer.said}}
    if job_id is None:
        write_atomically(folder / SPEC, json.dumps(masked(spec, ctx.env, argv), indent=1), private=True)
        v = Verdict("failed", causes.NEVER_STARTS if "configuration is not available" in answer.said
                    or "partition" in answer.said or "can not be satisfied" in answer.said else None,
                    f"sbatch refused the job: {answer.said}",
                    "Fix what sbatch names; `dfdoctor check -- sbatch ...` compares the request with the "
                    "partition.", [f"{' '.join(answer.argv)}: rc {answer.rc}", answer.said])
        return Started(run_id, folder, refused=v, run=_run(spec, folder, None))
    return Started(run_id, folder, handle=(job_id, spec, argv))


def watch_job(ctx: Context, ask: LaunchAsk, job: Started, timeline: list[dict[str, Any]]) -> Judged:
    """Record where Slurm will write, watch, and judge (running: its output grows once it has printed for
    `settle_s`, never longer than the watch)."""
    job_id, spec, argv = job.handle
    sub, folder = submission_of(ctx), job.run_dir
    pats = {"output_pattern": sub.get("output") or sbatch_default_output(sub), "error_pattern": sub.get("error") or ""}
    try:
        first = watch.look(job_id, pats)
        paths = {"stdout": first.job.stdout, "stderr": first.job.stderr, "workdir": first.job.workdir, **pats}
        spec["slurm"].update(paths)
        write_atomically(folder / SPEC, json.dumps(masked(spec, ctx.env, argv), indent=1), private=True)
        RunFolder.at(folder).append_event("submitted", job_id=job_id, **paths)
        seen = watch.watch(job_id, paths, ask.watch_s, on_event=lambda n, d: timeline.append(
            _event(n, " ".join(f"{k}={v}" for k, v in d.items() if v))), sampler=onnode.look,
            settle_s=min(ask.settle_s, ask.watch_s))
    except KeyboardInterrupt:
        _interrupted_after_submission(job_id, folder)
        raise
    near.ask_for(seen)  # a missing module's typo, asked on its node as the gate asks here
    return Judged(offer_stop(judge(seen), job.run_id), _run(spec, folder, seen))


def status(cwd: Path, ref: Optional[str], watch_s: float) -> Report:
    """`status slurm:JOBID` (any job) or `status RUN` of a run that `launch -- sbatch` made."""
    started = now_iso()
    if ref and ref.startswith("slurm:"):
        job_id, spec, folder = ref.split(":", 1)[1], {}, None
        # an array task is JOB_TASK, as the array launch's own verdict names it (slurm:263_1)
        if not all(is_whole(part) for part in job_id.split("_", 1)) or int(job_id.split("_", 1)[0]) <= 0:
            raise UsageError(f"{ref}: a Slurm job id is a number, 1 or more, or JOB_TASK for an array task "
                             "(slurm:12345, slurm:263_1)")
        paths: dict[str, str] = {}
    else:
        folder = find_run(cwd, ref)
        spec = json.loads((folder / SPEC).read_text())
        job_id = spec["slurm"]["job_id"]
        paths = {k: spec["slurm"].get(k) or "" for k in ("stdout", "stderr", "workdir", *watch.PATTERN_KEYS)}
    ctx = Context(command=list(spec.get("argv") or []), cwd=Path(spec.get("cwd") or cwd))
    if not job_id:
        v = Verdict("failed", None, f"sbatch refused this job: {spec['slurm'].get('sbatch')}", "Submit it again.")
        return _report(ctx, "status", started, v, [], [], _run(spec, folder, None))
    seen = watch.watch(job_id, paths, watch_s, sampler=onnode.look)
    if not seen.job.stdout and ref and ref.startswith("slurm:") and seen.job.ended:
        seen.notes.append("Slurm no longer records where this job wrote (scontrol forgets StdOut after MinJobAge "
                          "and sacct 22.05 never has it): its output file was not read")
    near.ask_for(seen)  # a missing module's typo, asked on its node as the gate asks here
    verdict = offer_stop(judge(seen), (spec.get("run_id") or folder.name) if folder is not None else f"slurm:{job_id}")
    note = stop_note(events.read(folder / LAUNCHER)) if folder is not None else None
    if note is not None and seen.job.state == "CANCELLED":  # the cancel was `dfdoctor stop`'s: the user's own
        verdict = stopped_verdict(note, spec.get("run_id") or folder.name, seen.evidence())
    report = _report(ctx, "status", started, verdict, [], [], _run(spec, folder, seen))
    if folder is not None:
        save_report(folder, report)
    return report


def output_instead_of_log(ctx: Context, run: dict[str, Any]) -> Instead:
    """Slurm writes the job's output where sbatch's --output says (slurm-%j.out in the job's folder when it says
    nothing), never to dfdoctor's --log: the file itself once Slurm named it, else the pattern and its folder."""
    if run.get("log"):
        where = f"Slurm writes the job's output to {run['log']}"
    else:
        sub = submission_of(ctx)
        folder = sub.workdir or str(ctx.cwd)
        given = sub.get("output")
        where = (f"Slurm writes the job's output where sbatch's --output says ({given}, relative to {folder})"
                 if given else f"Slurm writes the job's output to {sbatch_default_output(sub)} in the submit folder "
                 f"{folder} (%j: the job id), as sbatch does without --output")
    return Instead(where, "read the job's output there (`dfdoctor status RUN` reads it too); to choose the file, "
                          "give sbatch --output (#SBATCH --output=...), not dfdoctor's --log")


def _interrupted_after_submission(job_id: str, folder: Path) -> None:
    """Ctrl-C once the job is submitted: Slurm runs it on without dfdoctor, so say which job it is, where it
    stands, and how to stop it or look again (the CLI then says "interrupted")."""
    try:
        state = job_facts(job_id, with_sacct=False).state or "state unknown"
    except KeyboardInterrupt:  # a second Ctrl-C: the words still matter more than the state
        state = "state not read"
    sys.stderr.write(f"dfdoctor: job {job_id} was submitted and is {state}; Slurm goes on with it. "
                     f"`dfdoctor stop {folder.name}` (or `scancel {job_id}`) stops it; `dfdoctor status "
                     f"{folder.name}` (or slurm:{job_id}) looks again.\n")
    sys.stderr.flush()
    try:
        RunFolder.at(folder).append_event("interrupted", job_id=job_id, state=state)
    except OSError:
        pass


def _run(spec: dict, folder: Optional[Path], seen: Optional[Seen]) -> dict[str, Any]:
    info: dict[str, Any] = {"id": spec.get("run_id"), "dir": str(folder) if folder else None, "pid": None,
                            "exit_code": None, "signal": None}
    if seen is not None:
        code, sig = split_exit(seen.job.exit_code)
        info.update(exit_code=code if seen.job.ended else None, signal=sig or None,
                    slurm=seen.job.to_dict(), log=seen.job.stdout)
    return info
