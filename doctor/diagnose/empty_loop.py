"""A job that spins at the head of a `for` over a DataLoader that yields nothing: the loop's body is never seen.

The shape: `def cycle(dl): while True: for data in dl: yield data` (or `while step < steps: for batch in loader`)
over a loader with no batch (a validation split smaller than one batch with drop_last=True, a split of 0 rows).
The process burns a core and prints nothing, which reads like a block-buffered stdout; the stacks say otherwise:
the looks that can be read show the user's innermost frame at the `for` line itself, with torch's DataLoader
starting a new pass under it, and none shows a batch fetched or the loop's body (loop_looks.py reads them). Named with the loader the loop runs over (the variable at the caller's line) and the options its
construction reads, so the fix is said in the project's terms.
"""

from __future__ import annotations

import ast
import os
import time
from typing import Callable, Optional, Union

import psutil
from dfdoctor.diagnose import loop_looks

_FOLLOW = 4  # how many assignments back the loader's construction is read for the options it uses
MORE_LOOKS = 6  # at most per process, when the looks the watch took leave it undecided (loop_looks.py says when)
MORE_LOOKS_S = 6.0  # and for all the job's processes together, only while this much time has not passed
LOOK_GAP_S = 0.3  # between two of them: a pass of an empty loader takes about a millisecond
UNDECIDED = "undecided"  # a pass seen and nothing against it, not yet enough: neither this nor a buffered stdout
LEAN = "a loop over a DataLoader that yields no batch (an empty loader)"  # what UNDECIDED leans towards, in words


def empty_loader(all_seen, look_again: Optional[Callable] = None) -> Union[None, str, tuple[str, str, list[str]]]:
    """(headline, fix, evidence) for a process whose looks prove it spins at a `for` head over a DataLoader with no
    batch; UNDECIDED when they lean that way without proving it; else None. stuck.py runs it among its rules (it
    passes its Seen processes, and `look_again(seen)` to take one more look at a process here), before calling a
    busy silence buffered."""
    undecided, deadline = False, time.monotonic() + MORE_LOOKS_S
    for s in all_seen:
        reading = _reading(s, look_again, deadline)
        if reading is None or not reading.proven:
            undecided |= reading is not None and reading.leaning
            continue
        return _named(s, reading)
    return UNDECIDED if undecided else None


def lean(all_seen) -> Optional[str]:
    """What the looks taken lean towards without proving it, in words (no more looks are taken: a Slurm node's);
    None: nowhere. A pass of a DataLoader seen at a `for` head and nothing against it (UNDECIDED); else a working
    process seen only at a bare `for` head (head_only), which no reading names."""
    if empty_loader(all_seen) == UNDECIDED:
        return LEAN
    for s in all_seen:
        reading = head_only(s)
        if reading is not None:
            h = reading.head
            return (f"an empty loader's loop: each look that could be read caught {s.proc.name()} at the head of "
                    f"`{h.words}` ({os.path.basename(h.file)}:{h.line}), none in a pass of a DataLoader, the loop's "
                    "body or elsewhere (a tight loop over something else can look the same)")
    return None


def head_only(s) -> Optional[loop_looks.Reading]:
    """The reading of a working Python process whose looks show it only at a bare `for` head, none in the loop's
    body or a DataLoader's pass (loop_looks.Reading.head_only); None: not so."""
    if s.proc.gone or not s.proc.python or s.steady:
        return None
    reading = loop_looks.read(s.proc.looks)
    return reading if reading.head_only else None


def _reading(s, look_again: Optional[Callable], deadline: float) -> Optional[loop_looks.Reading]:
    """The reading of a working Python process's looks, with more looks taken while it is undecided (or some
    look could not be read and none showed a pass, or a look since the last against it says nothing against it) and
    `look_again` is given, up to MORE_LOOKS before `deadline`
    (shared by the job's processes: a py-spy that never reads them costs this once a round)."""
    if s.proc.gone or not s.proc.python or s.steady:
        return None
    reading, taken = loop_looks.read(s.proc.looks), 0
    # resumed: a look that disagrees with the looks since may come (a loader slow to start a pass, in a loop that
    # has batches), or one that shows the pass: say so this round rather than the next
    while (reading.undecided or reading.blind or reading.resumed) and look_again is not None and \
            taken < MORE_LOOKS and time.monotonic() < deadline and not s.proc.gone:
        time.sleep(LOOK_GAP_S)
        look_again(s)
        taken += 1
        reading = loop_looks.read(s.proc.looks)
    return reading


def _named(s, reading: loop_looks.Reading) -> tuple[str, str, list[str]]:
    """The finding in the project's terms: the loop, the loader it runs over, the options that built it."""
    user, caller, loop = reading.user, reading.caller, reading.head.words
    name = _loader_name(caller)
    options, built = _options(s, caller, name)
    head = (f"{s.proc.name()} loops at {user.short()} (`{loop}`) and never enters the loop's body: the loader "
            f"{f'`{name}` ' if name else ''}yields no batch, so the loop starts pass after pass of an empty "
            f"DataLoader, using CPU and printing nothing (not a buffered stdout)")
    unread = f"; {reading.unread} could not be read" if reading.unread else ""
    lines = [f"{reading.passes} of {len(reading.kinds)} looks show the main thread at {user.short()} with torch's "
             f"DataLoader starting a pass under it and no batch fetched; none showed the loop's body{unread}"]
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


def _loader_name(caller) -> Optional[str]:
    """The variable the caller's line hands the loop (`next(val_dl)` -> val_dl; `for b in loader` -> loader)."""
    from dfdoctor.project.source import tree_of  # start-up: the project model, for a traceback alone (issue 45)
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
    from dfdoctor.project.source import tree_of  # start-up: the project model, for a traceback alone (issue 45)
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

