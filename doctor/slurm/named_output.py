"""An sbatch --output/--error that is a file the job names for another purpose (its batch script, the training
command's script, a config or data file it names): slurmstepd opens it, truncated unless --open-mode=append, before
the batch script runs. `launch -- sbatch -o train.py job.sbatch` emptied train.py, ran the empty script and said
OK; `-o job.sbatch` replaced the user's batch script with the job's output. slurm.output fails it (never passed by
--force), and the Slurm start refuses it before the submission (`launch --no-check`), in the words and cause of a
local --log naming the script (checks/log_writable.py, diagnose/log_is_input.py). dfdoctor's own --log is not
used by a Slurm launch: Slurm writes where sbatch says."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from dfdoctor import causes
from dfdoctor.model import Result, Verdict, fail
from dfdoctor.named_files import Named, named_files, put_to_another_purpose, suggested_log
from dfdoctor.slurm import patterns, script
from dfdoctor.slurm.sbatch import Submission

OUTCOME = "Slurm would write the job's output over it"


@dataclass(frozen=True)
class Clash:
    """`option` (--output/--error), as typed (`typed`), opens `path`, which is `same`, one of `named`."""
    option: str
    typed: str
    path: str
    named: list[Named]
    same: Named


def clash(sub: Submission, cwd: Path) -> Optional[Clash]:
    """The first literal --output/--error (or one whose letters are known before submission: `%x`) that is, by
    device and inode on this machine, a file the submission names; None otherwise (a file not made yet is
    nobody's)."""
    work = script.resolve(sub.workdir or str(cwd), str(cwd))  # Slurm opens relative names there
    named = _named(sub, work)
    array = bool(sub.get("array"))
    for option, pattern in (("--output", sub.get("output") or patterns.default_output(array)),
                            ("--error", sub.get("error"))):
        name = patterns.resolve(pattern, job_name=sub.job_name, array=array) if pattern else None
        if name is None:  # %j and the like: a new name per job, no file the user named
            continue
        path = script.resolve(name, work)
        same = put_to_another_purpose(path, named)
        if same:
            typed = pattern if pattern == name else f"{pattern} ({name})"  # %x.py: the file Slurm would open
            return Clash(option, typed, path, named, same[0])
    return None


def finding(sub: Submission, cwd: Path) -> list[Result]:
    """slurm.output's failure, marked as log.writable's is so that --force does not pass it (engine.never_forced)."""
    c = clash(sub, cwd)
    if c is None:
        return []
    also = "" if Path(c.same.path) == Path(c.path) else f" (as {c.same.path})"
    return [fail(f"{c.typed} {c.same.what()}: {OUTCOME}", causes.LOG_NOT_WRITABLE,
                 evidence=(f"{c.option} {c.typed} is the same file{also} on this submit host: dfdoctor never writes "
                           "into a file the command names for another purpose, even with --force",),
                 data={"log_is_input": {"path": c.same.path, "role": c.same.role, "word": c.same.word}},
                 fix=f"point {c.option} at a file of its own, e.g. {suggested_log(c.named, c.path)} (mkdir -p logs "
                     "first; not tried)")]


def refused(sub: Submission, cwd: Path) -> Optional[Verdict]:
    """The start's refusal (the checks skipped, or not asked to stop it), before anything is submitted."""
    c = clash(sub, cwd)
    if c is None:
        return None
    from dfdoctor.diagnose.log_is_input import refusal  # start-up: a refusal alone
    return refusal(c.typed, c.path, c.named, c.same, option=c.option, outcome=OUTCOME)


def _named(sub: Submission, work: str) -> list[Named]:
    """The batch script, and the files the training command names (against the folder its `cd`s lead to)."""
    out = [Named(str(sub.script), "script", str(sub.script))] if sub.script is not None else []
    train = script.find(sub.script_text or "")
    if train is not None:
        there = script.folder_after(sub.script_text or "", work)
        out += named_files(train.argv, lambda p: script.resolve(p, there))
    return out
