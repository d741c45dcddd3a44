"""An sbatch --output/--error that is a file the job names for another purpose (its batch script, the training
command's script, a config or data file it names): slurmstepd opens it, truncated unless --open-mode=append, before
the batch script runs. `launch -- sbatch -o train.py job.sbatch` emptied train.py, ran the empty script and said
OK; `-o job.sbatch` replaced the user's batch script with the job's output. Refused before the submission,
checked or not, with --force or not, in the words, cause and exit code of a local --log naming the script
(diagnose/log_is_input.py). dfdoctor's own --log is not used by a Slurm launch: Slurm writes where sbatch says."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from dfdoctor.model import Verdict
from dfdoctor.named_files import Named, named_files, same_as
from dfdoctor.slurm import patterns, script
from dfdoctor.slurm.sbatch import Submission


def refused(sub: Submission, cwd: Path) -> Optional[Verdict]:
    """The refusal when a literal --output/--error (or one whose letters are known before submission: `%x`) is,
    by device and inode, a file the submission names; None otherwise (a file not made yet is nobody's)."""
    work = script.resolve(sub.workdir or str(cwd), str(cwd))  # Slurm opens relative names there
    named = _named(sub, work)
    array = bool(sub.get("array"))
    for option, pattern in (("--output", sub.get("output") or patterns.default_output(array)),
                            ("--error", sub.get("error"))):
        name = patterns.resolve(pattern, job_name=sub.job_name, array=array) if pattern else None
        if name is None:  # %j and the like: a new name per job, no file the user named
            continue
        path = script.resolve(name, work)
        same = [n for n in same_as(path, named) if n.role != "log-option"]  # the job's own log: a shared writer
        if same:
            from dfdoctor.diagnose.log_is_input import refusal  # start-up: a refusal alone
            typed = pattern if pattern == name else f"{pattern} ({name})"  # %x.py: the file Slurm would open
            return refusal(typed, path, named, same[0], option=option,
                           outcome="Slurm would write the job's output over it")
    return None


def _named(sub: Submission, work: str) -> list[Named]:
    """The batch script, and the files the training command names (against the folder its `cd`s lead to)."""
    out = [Named(str(sub.script), "script", str(sub.script))] if sub.script is not None else []
    train = script.find(sub.script_text or "")
    if train is not None:
        there = script.folder_after(sub.script_text or "", work)
        out += named_files(train.argv, lambda p: script.resolve(p, there))
    return out
