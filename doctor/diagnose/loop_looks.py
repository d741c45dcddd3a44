"""What each look at one process says about a `for` head over a DataLoader: a pass of an empty loader, a batch
being fetched, or nothing either way; and whether the looks taken so far prove the empty loader.

One look is a moment, and under load a moment is often unreadable: py-spy, reading a running process without
pausing it, fails now and then, or catches the loop in a frame nobody listed (`<frozen abc>`, the profiler's op
dispatch). So no single look decides. A look that shows nothing is ignored; a look that shows data flowing (a
batch fetched, collated, a dataset's `__getitem__`, a worker's queue, the loop's body, or the process gone on
elsewhere) rules the empty loader out; the empty loader is proven by two looks or more at the same `for` head with
a pass of the DataLoader under it, one of them caught starting a pass (or four, none caught starting). Short of that, the reading is undecided:
the caller may look again. Order counts where the looks disagree: looks after the last one that ruled the empty
loader out that show nothing against it (the job went on from training into an empty evaluation loop) prove
nothing, but they are what the job does now, so no other reading (a buffered stdout) is taken from those looks.
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

from dfdoctor.diagnose.stackclass import Frame
from dfdoctor.diagnose.waits import is_library, main_frames

LOADER = "torch/utils/data/dataloader.py"
PASS_START = {"__iter__", "_get_iterator", "__init__", "_reset", "_next_index"}  # a pass begins or asks its sampler
# Frames that show a batch on its way: the fetcher fetching (its __init__ is a pass starting), collation, a
# dataset's item, a worker's queue read or its batch processed.
_FETCH_FILES = ("torch/utils/data/_utils/fetch.py", "torch/utils/data/_utils/collate.py")
_FETCH_FUNCS = {"__getitem__", "__getitems__", "_get_data", "_try_get_data", "_process_data"}

PASS, FETCH, MOVED, NOTHING = "pass", "fetch", "moved", "nothing"
CLEAN_PASSES = 4  # passes that prove it without one caught starting


@dataclass(frozen=True)
class Head:
    """A `for` statement over a DataLoader: where it is, its words, and the head lines of the loops around it in
    its function (a look there is the loop going round, not its body)."""

    file: str
    line: int
    words: str
    around: frozenset
    over_range: bool = False  # `for ... in range(...)`: no DataLoader ever runs a pass at this head


@dataclass
class Reading:
    """The looks of one process, read against one `for` head."""

    head: Optional[Head] = None
    kinds: list[str] = field(default_factory=list)  # one per look: PASS, FETCH, MOVED or NOTHING
    unread: int = 0  # looks whose main thread could not be read (py-spy failed, or no frame)
    started: bool = False  # a look caught the DataLoader starting a pass
    user: Optional[Frame] = None  # the head's frame in the last look that showed a pass
    caller: Optional[Frame] = None  # the user's frame that drives it

    @property
    def passes(self) -> int:
        return self.kinds.count(PASS)

    @property
    def blind(self) -> bool:
        """No look showed the head, and some look could not be read: another look may show it."""
        return self.head is None and self.unread > 0

    @property
    def ruled_out(self) -> bool:
        """A look showed data flowing, or the process somewhere else than this loop."""
        return FETCH in self.kinds or MOVED in self.kinds

    @property
    def proven(self) -> bool:
        """Two passes, one caught starting; or, where every look caught the loader inside `__next__` (a loaded
        machine spends a pass in the profiler's record_function), CLEAN_PASSES of them and never a batch."""
        return self.head is not None and not self.ruled_out and \
            (self.passes >= 2 and self.started or self.passes >= CLEAN_PASSES)

    @property
    def undecided(self) -> bool:
        """A `for` head seen and nothing against it, but not yet enough to say so: another look may decide."""
        return self.head is not None and not self.ruled_out and not self.proven

    @property
    def head_only(self) -> bool:
        """Undecided with no pass seen: each look that could be read caught the process at the bare `for` head
        (never a `range`'s), none in a pass of the DataLoader, the loop's body or elsewhere. An empty loader's loop
        caught between two passes reads so, as may a tight loop over something else: too little to name the empty
        loader, and no reading of a buffered stdout either (stuck._buffered): a Slurm node, which takes no more
        looks, said `output-buffered` of the empty loader's job when its two looks were so."""
        return self.undecided and self.passes == 0

    @property
    def resumed(self) -> bool:
        """Ruled out by earlier looks only: the looks since the last one that showed data flowing (or the process
        elsewhere) show nothing against the loop (a pass at the head, the head bare, or a look not read). A job
        that trains over one loader and then evaluates over an empty one at the same `for` head (a `cycle(dl)`
        helper) reads so when a first look caught it training, the looks after it in the loop or not read (py-spy
        fails often on a job spinning under load); so does a loop whose loader is slow to start its next pass.
        Not proof either way: what the job does now was not seen against the loop, so no buffered stdout is
        taken from these looks; more looks (or the next round) decide."""
        return self.ruled_out and self.kinds[-1] not in (FETCH, MOVED)

    @property
    def leaning(self) -> bool:
        """Undecided with a pass of the DataLoader seen, or resumed: enough to hold back another reading (a
        buffered stdout) for this round; a bare `for` head alone (`for i in range(n)` in a busy job) is not."""
        return self.undecided and self.passes >= 1 or self.resumed


def read(looks) -> Reading:
    """The reading of a process's looks (jobstacks.Look), against the `for` head most of them show."""
    frames = [main_frames(lk.stacks.text) for lk in looks]
    # a main thread with no frame of the user's (`BatchSampler.__iter__` alone: py-spy read a stack cut short; the
    # script's own `<module>` is under every whole one) is a look not read, as one with no frame
    unread = sum(1 for fr in frames if all(is_library(f) for f in fr))
    # the head most looks show with the DataLoader under it; else one shown bare (caught between two calls into
    # the loader, or read half-way): not proof of anything, a reason to look again
    heads = Counter(h for h in (_head_at(f) for f in frames) if h is not None) or \
        Counter(h for h in (_head_at(f, bare=True) for f in frames) if h is not None)
    if not heads:
        return Reading(kinds=[NOTHING] * len(looks), unread=unread)
    head = heads.most_common(1)[0][0]
    chain = {(f.file, f.line) for fr in frames if _head_index(fr, head) is not None for f in fr if not is_library(f)}
    reading = Reading(head=head, unread=unread)
    for fr in frames:
        kind = _kind(fr, head, chain)
        reading.kinds.append(kind)
        if kind == PASS:
            i = _head_index(fr, head)
            reading.started |= any(f.func in PASS_START and _path(f).endswith(LOADER) for f in fr[:i])
            reading.user = fr[i]
            reading.caller = next((f for f in fr[i + 1:] if not is_library(f)), None)
    return reading


def _kind(frames: tuple, head: Head, chain: set) -> str:
    """What one look's main thread shows about the loop at `head`."""
    if any(_fetching(f) for f in frames):
        return FETCH  # whatever else is on the stack, a batch is on its way: the loader has data
    i = _head_index(frames, head)
    if i is not None:
        # at the head, with the loader (or user code it calls: a dataset's __len__, a sampler) under it
        return PASS if any(_path(f).endswith(LOADER) for f in frames[:i]) else NOTHING
    user = next((f for f in frames if not is_library(f)), None)
    if user is None or (user.file, user.line) in chain:
        return NOTHING  # unreadable, or a stack cut short: it shows only what the passes showed around them
    if user.file == head.file and (user.line in head.around):
        return NOTHING  # the loop around the `for` going round (`while True:` before the next pass)
    return MOVED  # the loop's body, or on elsewhere: the loader gave a batch, or the loop ended


def _fetching(f: Frame) -> bool:
    path = _path(f)
    if path.endswith(_FETCH_FILES[0]):
        return f.func != "__init__"  # the fetcher built for a new pass fetches nothing
    return path.endswith(_FETCH_FILES[1:]) or f.func in _FETCH_FUNCS


def _head_index(frames: tuple, head: Head) -> Optional[int]:
    """Where in the stack (innermost first) the frame at the head is, or None."""
    return next((k for k, f in enumerate(frames) if f.file == head.file and f.line == head.line), None)


def _head_at(frames: tuple, bare: bool = False) -> Optional[Head]:
    """The `for` head the innermost user frame of a look stands on, with the DataLoader under it (`bare`: with
    or without it, but never a loop over `range(...)`: a look there is a busy loop going round, the job's own
    work, never a pass of a loader caught between two calls into it; CI called a buffered `for i in range(n)`
    job `running`, its second look at that head after one in its body read as a loop resumed)."""
    k = next((k for k, f in enumerate(frames) if not is_library(f)), None)
    if k is None or not (bare or any(_path(f).endswith(LOADER) for f in frames[:k])):
        return None
    head = for_head(frames[k].file, frames[k].line)
    return None if head is None or (bare and head.over_range) else head


def for_head(file: str, line: int) -> Optional[Head]:
    """The `for` statement whose head is `line` of `file`, or None."""
    from dfdoctor.project.source import tree_of  # start-up: the project model, for a traceback alone (issue 45)
    tree = tree_of(file)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and node.lineno == line:
            words = f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}:"
            over_range = isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Name) and \
                node.iter.func.id == "range"
            return Head(file, line, words, frozenset(_loops_around(tree, node)), over_range)
    return None


def _loops_around(tree: ast.AST, node: ast.For) -> list[int]:
    """The head lines of the loops that enclose `node` in its own function."""
    out: list[int] = []

    def visit(n: ast.AST, loops: list[int]) -> bool:
        if n is node:
            out.extend(loops)
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            loops = []  # a loop outside the function is not this frame's
        here = loops + [n.lineno] if isinstance(n, (ast.For, ast.While)) else loops
        return any(visit(c, here) for c in ast.iter_child_nodes(n))

    visit(tree, [])
    return out


def _path(f: Frame) -> str:
    return f.file.replace("\\", "/")
