"""Ask sbatch itself: `sbatch --test-only` with the user's exact options and script answers "would sbatch accept
this, and where and when would it start" without queueing anything. Its refusal is an observed fact (sbatch's own
words); what it accepts is never blocked on a static reading of the options."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Mapping, Optional, Sequence

from dfdoctor import causes
from dfdoctor.slurm import commands
from dfdoctor.lazy_re import compile_later

_WILL_START = compile_later(r"Job (\d+) to start at (\S+) using (\d+) processors? on nodes (\S+) in partition (\S+)")
_PREFIX = compile_later(r"^(sbatch: (error: |Warning: |warning: )?|allocation failure: )")
# Slurm answers a start far in the future (year 6109 was seen) when no node can take the job now (every one down or
# drained): that is no time, and is not repeated to the user as one.
_FAR_YEARS = 5
# Slurm refuses a script over SchedulerParameters' max_script_size (4 MiB unless set) with this error code's
# generic text, which names no script at all.
MAX_SCRIPT_DEFAULT = 4 << 20
# Refusals that mean the cluster has nothing that could run the request: the job would never start.
_NEVER = ("configuration is not available", "can not be satisfied", "invalid partition", "Invalid partition",
          "generic resource", "Invalid feature specification", "Node count specification invalid",
          "More processors requested than permitted", "Requested time limit is invalid")


@dataclass(frozen=True)
class Asked:
    """What `sbatch --test-only` answered (rc None: it could not be asked)."""

    answer: commands.Answer

    @property
    def asked(self) -> bool:
        return self.answer.rc is not None

    @property
    def accepted(self) -> bool:
        return self.answer.rc == 0 and self.start is not None

    @property
    def refused(self) -> bool:
        return self.asked and not self.accepted

    @property
    def start(self) -> Optional[dict[str, str]]:
        """{'at', 'cpus', 'nodes', 'partition'} from "Job N to start at T using C processors on nodes X in ..."."""
        m = _WILL_START.search(self.answer.err + self.answer.out)
        return dict(zip(("at", "cpus", "nodes", "partition"), m.groups()[1:])) if m else None

    @property
    def start_unknown(self) -> bool:
        """sbatch accepted the job but its start time is years away: a placeholder, not an estimate."""
        year = re.match(r"(\d{4})-", (self.start or {}).get("at") or "")
        return bool(year) and int(year.group(1)) > datetime.now().year + _FAR_YEARS

    @property
    def warnings(self) -> list[str]:
        return [_PREFIX.sub("", l).strip() for l in self._lines() if l.startswith("sbatch: Warning:")]

    @property
    def words(self) -> str:
        """sbatch's refusal in one line, its own words (continuation lines joined, prefixes dropped)."""
        lines = [l for l in self._lines() if not l.startswith("sbatch: Warning:") and not _WILL_START.search(l)]
        return " ".join(" ".join(_PREFIX.sub("", l).split()) for l in lines if _PREFIX.sub("", l).strip())

    @property
    def never_starts(self) -> bool:
        """A refusal that says the cluster has nothing that could run the request."""
        return self.refused and any(n in self.words for n in _NEVER)

    def _lines(self) -> list[str]:
        return [l.rstrip() for l in (self.answer.err + "\n" + self.answer.out).splitlines() if l.strip()]


def test_argv(argv: Sequence[str]) -> list[str]:
    """The user's sbatch line with `--test-only` after the command word (options and script untouched)."""
    words = list(argv)
    return [words[0], "--test-only", *words[1:]]


def ask(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> Asked:
    """Run `sbatch --test-only` once, where and with the environment the real submission would have."""
    return Asked(commands.run(test_argv(argv), cwd=cwd, env=dict(env)))


# One wording for sbatch's refusal and slurm.partition's reading of the same request: the report says it once.
NEVER_STARTS_FIX = ("Ask for what a node of the partition has, or submit to another partition (`sinfo -N -l` lists "
                    "the nodes, `scontrol show partition` the limits).")


def refusal_fix(asked: Asked, script: Optional[Path], size: int) -> tuple[str, Optional[str]]:
    """(the fix, the cause) for a refusal: sbatch's words name the fault; the fix says how to mend it."""
    w = asked.words
    name = str(script) if script else "the script"
    if "DOS line breaks" in w:
        return (f"Convert the script to UNIX line endings: `sed -i 's/\\r$//' {name}` (or `dos2unix {name}`).",
                causes.SBATCH_REFUSED)
    if "does not look like a batch script" in w:
        return (f"Make the first line of {name} an interpreter line, e.g. `#!/bin/bash`.", causes.SBATCH_REFUSED)
    if "Invalid --time" in w:
        return ("Give --time as minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (e.g. `--time=1:30:00`).",
                causes.SBATCH_REFUSED)
    if "too long" in w and size >= MAX_SCRIPT_DEFAULT:
        return (f"{name} is {size / (1 << 20):.1f} MiB, over Slurm's limit for a batch script "
                "(SchedulerParameters max_script_size, 4 MiB unless the admins raised it): keep data out of the "
                "script (read it from a file the job opens).", causes.SBATCH_REFUSED)
    if "unrecognized option" in w or "invalid option" in w:
        return ("Remove or correct the option sbatch names (`sbatch --help` lists them).", causes.SBATCH_REFUSED)
    if asked.never_starts:
        return NEVER_STARTS_FIX, causes.NEVER_STARTS
    return "Fix what sbatch names, then run the check again.", causes.SBATCH_REFUSED
