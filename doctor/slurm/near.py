"""A Slurm job that died of `No module named 'X'` at its own line: what is installed near X, asked on its node.

The local gate says a typo as a reviewer would (doctor/project/typos.py): "did you mean `torch` (installed,
2.13.0)?", and prints `pip install X` only for a name the project declares or that nothing installed is close
to. A Slurm job's interpreter lives on its node, so the same question is asked there: a short srun on the job's
batch host (`--immediate`: it gives up rather than queue) runs `checks/probes/_near.py`, sent on stdin, in the
interpreter the batch script's training line names, after the script's literal `cd`s and venv activation. What
cannot be established (a launcher such as torchrun between the script and Python, a node that does not take the
step in time, a script no longer readable) is said as not established, and no install is offered for it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from dfdoctor.diagnose import user_terms
from dfdoctor.diagnose.rules_runtime import Context
from dfdoctor.diagnose.traceback import PyError, parse_python_error
from dfdoctor.project import typos
from dfdoctor.slurm import commands, script
from dfdoctor.lazy_re import compile_later

IMMEDIATE_S = 5  # srun gives up when the node cannot take the step this soon
TIMEOUT_S = 40.0  # srun's start, and the interpreter listing what is installed (no import of the package)
_PY = compile_later(r"^python[\d.]*$")
_NO_MODULE = compile_later(r"No module named '([^']+)'")


@dataclass
class Near:
    """The answer for one missing module: what is installed near it on the node (None: not established, and
    `why_not` says why), where the project declares it (None: it does not, or was not read)."""

    name: str
    where: str  # `train.py:1`, the job's own import line
    node: str
    python: str = ""
    answer: Optional[dict[str, Any]] = None
    why_not: str = ""
    declared: Optional[str] = None


def ask_for(s: Any) -> None:
    """Ask for the job (s: a rules.Seen), and for the array task its verdict reads, when it died of a missing
    module; the answers go in `s.near` and `s.task.near`."""
    s.near = of_seen(s)
    if s.task is not None:
        s.task.near = of_seen(s.task)


def of_seen(s: Any) -> Optional[Near]:
    """For a job that ended (s: a rules.Seen) with `No module named 'X'` in its own output, the answer for X;
    None for any other end (nothing is asked)."""
    j = s.job
    if not j.ended or not (j.state == "FAILED" or (j.derived and j.derived != "0:0")):
        return None
    err = parse_python_error(s.stderr_text if j.stderr != j.stdout else s.output)
    missing = _NO_MODULE.search(err.message) if err is not None else None
    if err is None or missing is None or not err.exc_type.endswith(("ModuleNotFoundError", "ImportError")):
        return None
    return ask(j, err, missing[1])


def ask(job: Any, err: PyError, name: str) -> Near:
    """What is installed near `name` in the job's interpreter on its batch host (job: a slurm.job.JobFacts)."""
    node = (job.raw.get("BatchHost") or job.nodes or "").strip()
    near = Near(name, _where(err, job.workdir), node)
    text = _script_text(job.command)
    train = script.find(text) if text is not None else None
    folder = script.folder_after(text or "", job.workdir) if job.workdir else ""
    near.declared = _declared(train, folder, name)
    if err.in_library:
        near.why_not = "a library imports it, not the job's own code"
    elif text is None:
        near.why_not = f"the batch script {job.command or '?'} could not be read here"
    elif train is None:
        near.why_not = "the batch script has no python line dfdoctor can follow"
    elif not _is_python(train.argv[0]):
        near.why_not = f"its training line starts {train.argv[0]}, not python, so its interpreter is not known here"
    elif not node or any(c in node for c in "[,"):
        near.why_not = "its batch host is not known"
    else:
        near.python = train.argv[0]
        near.answer, near.why_not = _asked(job, node, folder, train.argv[0], _venv(text or ""), name)
    return near


def _asked(job: Any, node: str, folder: str, python: str, venv: Optional[str], name: str
           ) -> tuple[Optional[dict], str]:
    """_near.py's answer from the node, or (None, why not)."""
    shell = ('. "$1" >/dev/null 2>&1 || exit 97; shift; ' if venv else "") + 'exec "$1" - module "$2"'
    argv = ["srun", "-N1", "-n1", f"--immediate={IMMEDIATE_S}", "-w", node, "-J", "dfdoctor-near", "--mem=64M",
            "-t", "1", "--quiet"] + ([f"--partition={job.partition}"] if job.partition else []) + \
        ([f"--chdir={folder}"] if folder else []) + ["/bin/sh", "-c", shell, "sh"] + \
        ([venv] if venv else []) + [python, name]
    a = commands.run(argv, timeout=TIMEOUT_S, stdin=typos.NEAR_SCRIPT.read_text())
    lines = a.out.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if a.ok and lines else None
    except ValueError:
        found = None
    if isinstance(found, dict):
        return found, ""
    said = (a.err.strip().splitlines() or [f"status {a.rc}"])[-1]
    return None, f"srun on {node} gave no answer ({said})"


def _script_text(command: str) -> Optional[str]:
    """The batch script as it is on disk now (scontrol's Command)."""
    if not command or not os.path.isabs(command):
        return None
    try:
        return Path(command).read_text(errors="replace")
    except OSError:
        return None


def _is_python(word: str) -> bool:
    return bool(_PY.match(os.path.basename(word)))


def _venv(text: str) -> Optional[str]:
    """The last venv the script activates before its training line."""
    found = [s.path for s in script.prelude(text) if s.kind == "activate"]
    return found[-1] if found else None


def _declared(train: Optional[script.Training], folder: str, name: str) -> Optional[str]:
    """Where the job's project declares the module's distribution (its files read here, on the shared disk)."""
    if train is None or not folder or not os.path.isdir(folder):
        return None
    proj = user_terms.project_of(Context(argv=list(train.argv), cwd=folder, local=True))
    return proj.install.declares(name) if proj is not None and proj.install is not None else None


def _where(err: PyError, workdir: str) -> str:
    """`train.py:1`: the job's own import line, relative to its folder, as `check` names it."""
    frame = err.user_frame or ((err.file, err.line) if err.file else None)
    if frame is None:
        return err.where
    path = frame[0]
    if workdir and os.path.isabs(path) and path.startswith(workdir.rstrip("/") + "/"):
        path = os.path.relpath(path, workdir)
    return f"{path}:{frame[1]}"
