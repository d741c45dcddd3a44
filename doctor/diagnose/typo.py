"""A job that died of a typo in an import: the same words as `check` (doctor/project/typos.py), after the fact.

`ModuleNotFoundError: No module named 'torchh'` or `ImportError: cannot import name 'DataLoder' from
'torch.utils.data'` at the end of a local job's stderr. What is installed near the name is looked up in the
job's own interpreter, run once more in the job's folder; on another machine it cannot be looked at from here,
and the ordinary verdicts stand.
"""

from __future__ import annotations

import os
from typing import Optional

from dfdoctor import causes
from dfdoctor.diagnose.rules_runtime import Context, Finding
from dfdoctor.diagnose.traceback import PyError
from dfdoctor.lazy_re import compile_later

_NO_NAME = compile_later(r"cannot import name '(\w+)' from '([\w.]+)'")


def missing_module(err: PyError, ctx: Context, name: str, declared: Optional[str], install=None
                   ) -> Optional[tuple[str, str]]:
    """(question, fix) for a missing module that an installed name, or a requirement the project declares and
    the interpreter lacks (`install`: the project's), is close to (or a submodule an installed package lacks);
    None when the job ran elsewhere, nothing is close, or the project declares the name."""
    from dfdoctor.project import typos  # start-up: the project model, for a failure alone (issue 45)
    if not ctx.local or not ctx.python or err.in_library:  # a library's own import is no typo of the job's
        return None
    near = typos.ask(ctx.python, ["module", name], cwd=ctx.cwd, env=ctx.env or None)
    fix = typos.module_fix(name, near, _where(err, ctx), declared, install, ctx.python)
    if fix is None:
        return None
    return typos.module_question(name, near, install) or "", fix


def missing_name(err: PyError, ctx: Context) -> Optional[Finding]:
    """`from torch.utils.data import DataLoder`: an import-error naming the close name, not a reinstall."""
    from dfdoctor.project import typos  # start-up: the project model, for a failure alone (issue 45)
    from dfdoctor.diagnose import user_terms  # start-up: the project model, read for a fix alone (issue 45)
    m = _NO_NAME.search(err.message)
    if m is None or not err.exc_type.endswith("ImportError") or not ctx.local or not ctx.python:
        return None
    near = typos.ask(ctx.python, ["name", m.group(2), m.group(1)], cwd=ctx.cwd, env=ctx.env or None)
    proj = user_terms.project_of(ctx)
    words = typos.name_words(near, _where(err, ctx), typos.pin_of(proj.install if proj else None, m.group(2)))
    if words is None:
        return None
    return Finding(causes.IMPORT_ERROR, f"The job died at start: {words[0]}.", words[1])


def _where(err: PyError, ctx: Context) -> str:
    """`train.py:1`: the job's own line, relative to its folder, as `check` names it."""
    frame = err.user_frame or ((err.file, err.line) if err.file else None)
    if frame is None:
        return err.where
    path = frame[0]
    if ctx.cwd and os.path.isabs(path) and path.startswith(ctx.cwd.rstrip("/") + "/"):
        path = os.path.relpath(path, ctx.cwd)
    return f"{path}:{frame[1]}"
