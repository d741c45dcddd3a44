"""The project's data folder option behind a data set that downloads itself (torchvision.datasets' manner:
`MNIST(args.data_dir, train=True, download=True)`): read from the job's own frame that asked for the download, so
the fix of a failed download says where the files go in the project's terms (`--data-dir ../data`)."""

from __future__ import annotations

import ast
import os
from typing import Optional, Sequence

from dfdoctor.diagnose.traceback import is_library

_NAMESPACES = ("args", "opt", "opts", "cfg", "config", "FLAGS", "hparams")


def data_folder_option(frames: Sequence[tuple[str, int, Optional[str]]], argv: list[str],
                       cwd: Optional[str]) -> Optional[tuple[str, str, str]]:
    """(`--data-dir`, `../data, its default`, `main.py:19`): the option handed to the call with download=True in the
    job's own frames (innermost first), in the words the command or its default gives it; None when none is."""
    for file, line, code in reversed(list(frames)):
        if is_library(file) or "download" not in (code or "") or not os.path.isfile(file):
            continue
        call = _download_call(file, line)
        if call is None:
            continue
        for attr in _attrs(call):
            said = _option_words(attr, argv, cwd)
            if said:
                short = os.path.relpath(file, cwd) if cwd and file.startswith(cwd.rstrip("/") + "/") else file
                return (*said, f"{short}:{line}")
    return None


def _download_call(file: str, line: int) -> Optional[ast.Call]:
    """The call at `line` that passes download=True (or download=<something true-looking>)."""
    from dfdoctor.project.source import tree_of  # start-up: the project model, for a traceback alone (issue 45)
    tree = tree_of(file)
    if tree is None:
        return None
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno) and \
                any(k.arg == "download" for k in n.keywords):
            return n
    return None


def _attrs(call: ast.Call) -> list[str]:
    """`data_dir` of `args.data_dir` in the call's arguments (root first, as data set classes take it)."""
    out = []
    for arg in [*call.args, *(k.value for k in call.keywords if k.arg != "download")]:
        for n in ast.walk(arg):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in _NAMESPACES:
                out.append(n.attr)
    return out


def _option_words(attr: str, argv: list[str], cwd: Optional[str]) -> Optional[tuple[str, str]]:
    from dfdoctor import project as project_model

    try:
        proj = project_model.read(list(argv), cwd or ".")
    except (OSError, RecursionError, ValueError):
        return None
    opt = proj.options.find(attr)
    if opt is None:
        return None
    given = proj.given(opt)
    return opt.flag, (given if given is not None else f"{opt.default}, its default")
