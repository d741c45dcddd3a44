"""A job that spins at the head of a `for` over a DataLoader that yields nothing: the loop's body is never seen.

The shape: `def cycle(dl): while True: for data in dl: yield data` (or `while step < steps: for batch in loader`)
over a loader with no batch (a validation split smaller than one batch with drop_last=True, a split of 0 rows).
The process burns a core and prints nothing, which reads like a block-buffered stdout; the stacks say otherwise:
in every look the user's innermost frame is the `for` line itself, with torch's DataLoader starting a new pass
under it. Named with the loader the loop runs over (the variable at the caller's line) and the options its
construction reads, so the fix is said in the project's terms.
"""

from __future__ import annotations

import ast
import os
from typing import Optional

import psutil
from dfdoctor.diagnose.waits import is_library, main_of
from dfdoctor.project.source import tree_of

_ITER = "torch/utils/data/dataloader.py"
_PASS_START = {"__iter__", "_get_iterator", "__init__", "_reset", "_next_index"}  # a pass begins or asks its sampler
# The only frames under the `for` head when a pass has no batch: the loader's own iterator, its sampler, the
# profiler's record_function around __next__. A loader with data shows fetch.py, collate.py, a dataset's
# __getitem__ or a worker queue there.
_EMPTY_PASS = (_ITER, "torch/utils/data/sampler.py", "torch/autograd/profiler.py", "torch/_ops.py")
_FOLLOW = 4  # how many assignments back the loader's construction is read for the options it uses


def empty_loader(all_seen) -> Optional[tuple[str, str, list[str]]]:
    """(headline, fix, evidence) for a process seen at a `for` head over a DataLoader in every look, working; else
    None. stuck.py runs it among its rules (it passes its Seen processes), before calling a busy silence buffered."""
    for s in all_seen:
        spun = _spinning_for(s)
        if spun is None:
            continue
        user, caller, loop = spun
        name = _loader_name(caller)
        options, built = _options(s, caller, name)
        head = (f"{s.proc.name()} loops at {user.short()} (`{loop}`) and never enters the loop's body: the loader "
                f"{f'`{name}` ' if name else ''}yields no batch, so the loop starts pass after pass of an empty "
                f"DataLoader, using CPU and printing nothing (not a buffered stdout)")
        lines = [f"every look ({len(s.proc.looks)}) shows the main thread at {user.short()} with torch's "
                 "DataLoader starting a pass under it and no batch fetched; the loop's body was never seen"]
        if caller is not None:
            lines.append(f"the loop is driven from {caller.short()}" + (f", over `{name}`" if name else ""))
        if built:
            lines.append(f"`{name}` is built at {built}")
        said = "; ".join(options)
        fix = ("Make the loader yield at least one batch: a larger split or a smaller batch size" +
               (f" (now {said})" if said else "") + ", or drop_last=False for a split smaller than one batch; and "
               "fail when len(loader) == 0 instead of looping (not tried).")
        if said:
            lines.append(f"the options its construction reads: {said}")
        return head, fix, lines
    return None


def _spinning_for(s):
    """(the user's frame, the frame that drives it, the `for` line) when every look shows the same `for` head
    over a DataLoader and the process works; None otherwise."""
    if s.proc.gone or not s.proc.python or s.steady:
        return None
    looks = [lk for lk in s.proc.looks if lk.stacks.text]
    mains = [main_of(lk.stacks.text) for lk in looks]
    if len(mains) < 2 or any(m is None for m in mains):
        return None
    users = [_user_index(m.frames) for m in mains]
    if any(i is None for i in users):
        return None
    heads = {(m.frames[i].file, m.frames[i].line) for m, i in zip(mains, users)}
    inner = [f for m, i in zip(mains, users) for f in m.frames[:i]]
    if len(heads) != 1 or not any(f.func in _PASS_START and f.file.replace("\\", "/").endswith(_ITER) for f in inner):
        return None
    if any(not f.file.replace("\\", "/").endswith(_EMPTY_PASS) for f in inner):
        return None  # a batch being fetched, collated or waited for: the loader has data, the loop is data-bound
    main, i = mains[-1], users[-1]
    user = main.frames[i]
    loop = _for_head(user.file, user.line)
    if loop is None:
        return None
    caller = next((f for f in main.frames[i + 1:] if not is_library(f)), None)
    return user, caller, loop


def _user_index(frames) -> Optional[int]:
    return next((k for k, f in enumerate(frames) if not is_library(f)), None)


def _for_head(file: str, line: int) -> Optional[str]:
    """`for data in dl:` when `line` of `file` is the head of a for loop."""
    tree = tree_of(file)
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.For) and n.lineno == line), None) if tree else None
    return f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}:" if node else None


def _loader_name(caller) -> Optional[str]:
    """The variable the caller's line hands the loop (`next(val_dl)` -> val_dl; `for b in loader` -> loader)."""
    if caller is None:
        return None
    tree = tree_of(caller.file)
    if tree is None:
        return None
    for n in ast.walk(tree):
        if getattr(n, "lineno", None) != caller.line:
            continue
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "next" and n.args and \
                isinstance(n.args[0], ast.Name):
            return n.args[0].id
        if isinstance(n, ast.For) and isinstance(n.iter, ast.Name):
            return n.iter.id
    return None


def _options(s, caller, name: Optional[str]) -> tuple[list[str], Optional[str]]:
    """The options (`--batch-size 16`) the loader's construction reads, following assignments back in the caller's
    function; and file:line of the loader's assignment."""
    if caller is None or name is None:
        return [], None
    tree = tree_of(caller.file)
    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and n.lineno <= caller.line <= (n.end_lineno or n.lineno)), tree) if tree else None
    if fn is None:
        return [], None
    assigned = {t.id: a for a in ast.walk(fn) if isinstance(a, ast.Assign) for target in a.targets
                for t in ast.walk(target) if isinstance(t, ast.Name)}  # `train_set, val_set = random_split(...)`
    if name not in assigned:
        return [], None
    attrs: list[str] = []
    todo, seen = [name], set()
    for _ in range(_FOLLOW):
        nxt = []
        for var in todo:
            if var in seen or var not in assigned:
                continue
            seen.add(var)
            for n in ast.walk(assigned[var].value):
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in ("args", "opt",
                                                                                                     "cfg", "config"):
                    if n.attr not in attrs:
                        attrs.append(n.attr)
                elif isinstance(n, ast.Name):
                    nxt.append(n.id)
        todo = nxt
    built = f"{os.path.basename(caller.file)}:{assigned[name].lineno}"
    return _in_project_terms(s, attrs), built


def _in_project_terms(s, attrs: list[str]) -> list[str]:
    """`--batch-size 16 (its default)` for each attribute the script's parser sets."""
    from dfdoctor import project as project_model

    try:
        cwd = psutil.Process(s.proc.pid).cwd()
        proj = project_model.read(list(s.proc.cmdline), cwd)
    except (psutil.Error, OSError, ValueError):
        return []
    out = []
    for attr in attrs:
        opt = proj.options.find(attr)
        if opt is None:
            continue
        given = proj.given(opt)
        out.append(f"{opt.flag} {given}" if given is not None else f"{opt.flag} {opt.default}, its default")
    return out

