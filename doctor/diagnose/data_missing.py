"""An assert whose message names a data folder or file that is missing or holds nothing: `input-missing`, with
the README's steps that prepare the data (the project model's README lines before the one that runs the job).
Apart from rules_runtime's readers because it reads the project model (user_terms), which imports rules_runtime."""

from __future__ import annotations

import os
import re
from typing import Optional

from dfdoctor import causes
from dfdoctor.diagnose.rules_runtime import Context, Finding
from dfdoctor.diagnose.traceback import PyError
from dfdoctor.lazy_re import compile_later

_PATHLIKE = compile_later(r"(?<![\w:/])((?:\.{1,2}/|~/|/)?[\w.-]+(?:/[\w.-]+)+/?)")


def assert_names_missing_data(err: PyError, ctx: Context) -> Optional[Finding]:
    """An assert whose message names a data folder or file that is missing or holds nothing (llama2.c's
    `assert len(shard_filenames) > 0, f"No bin files found in {bin_dir}"`): input-missing, with the README's steps
    that prepare the data where it has them (the lines before the one that runs the job)."""
    from dfdoctor.diagnose import user_terms  # start-up: the project model, read for a fix alone (issue 45)
    if not err.exc_type.endswith("AssertionError") or not ctx.local or not ctx.cwd:
        return None
    for token in _PATHLIKE.findall(err.message):
        full = os.path.normpath(os.path.join(ctx.cwd, os.path.expanduser(token)))
        empty = os.path.isdir(full) and not any(os.scandir(full))
        if os.path.exists(full) and not empty and not re.search(r"\b(?:no|not|none|empty|missing)\b", err.message,
                                                                  re.I):
            continue
        if os.path.isfile(full):
            continue
        proj = user_terms.project_of(ctx)
        option = proj.option_for_path(full) if proj else None
        state = "does not exist" if not os.path.exists(full) else "is empty" if empty else "holds none of them"
        evidence = [f"message: {err.headline[:300]}", f"{token} resolves to {full} against the job's folder; it "
                    f"{state}"]
        steps = _readme_steps(proj)
        fix = f"Put the data the job reads into {full}" + (f", or point {option.flag} at where it is" if option
                                                           else "")
        if steps:
            evidence += [f"{r.where}: {r.text}" for r in steps]
            fix += ("; the README prepares it with " + ", then ".join(f"`{r.text}` ({r.where})" for r in steps)
                    + f", run in {proj.root}")
        return Finding(causes.INPUT_MISSING, f"The job looks for data in {token} at {err.user_where}, and it "
                       f"{state}: {err.message.strip()[:200]}.", fix + " (not tried).", evidence)
    return None


def _readme_steps(proj) -> list:
    """The README's commands that run another of the project's scripts just before its line that runs the job
    (`python tinystories.py download`, `... pretokenize`, then `python train.py`)."""
    runs = proj.runs() if proj is not None and proj.script is not None else []
    if not runs:
        return []
    first = runs[0]
    own = proj.script.name
    before = [r for r in proj.readme if r.file == first.file and r.line < first.line]
    steps = []
    for r in reversed(before):
        words = r.words
        if first.line - r.line > 12 or not words or not words[0].startswith("python") or \
                not any(w.endswith(".py") and os.path.basename(w) != own for w in words[1:]):
            break
        steps.insert(0, r)
    return steps
