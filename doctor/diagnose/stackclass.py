"""Read all-thread stack dumps (py-spy or faulthandler) and name a known lock cycle in them.

The one cycle known today is the concurrent-compile deadlock (cause `compile-deadlock`): a thread waits to
take dynamo's `compile_lock` (it stopped in a frame that acquires it: `compile_fx_backward`, dynamo's
`convert_frame.__call__`, `reset`) while another thread, inside a dynamo compile and so holding that lock, is
stopped in the autograd engine (`torch.autograd.grad`/`backward`), waiting for the device thread that is the
first thread. Both formats list the most recent call first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from dfdoctor import causes
from dfdoctor.diagnose.guardfix import COMPILE_GUARD_FIX  # noqa: F401 (kept importable here)
from dfdoctor.numbers import whole
from dfdoctor.lazy_re import compile_later

# faulthandler: 'Thread 0x00007f.. (most recent call first):' / '  File "path", line 12 in func'
_FH_THREAD = compile_later(r'^(?:Current thread|Thread) (0x[0-9a-fA-F]+|\d+)(?: \[[^\]]*\])? \(most recent call first\):')
_FH_STACK = compile_later(r'^Stack \(most recent call first\):')
_FH_FRAME = compile_later(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+|\?\?\?) in (?P<func>\S+)')
# py-spy dump: 'Thread 1234 (idle): "MainThread"' / '    func (path/file.py:12)'
_PS_THREAD = compile_later(r'^Thread (0x[0-9a-fA-F]+|\d+) \((?P<state>[^)]*)\)(?::\s*"(?P<name>[^"]*)")?')
_PS_FRAME = compile_later(r'^\s+(?P<func>\S+) \((?P<file>.+):(?P<line>\d+)\)\s*$')  # a path may hold ( ) and :


@dataclass(frozen=True)
class Frame:
    """One stack frame: file, line, function."""

    file: str
    line: int
    func: str
    raw: str = field(default="", compare=False)  # the line as the dump printed it

    def short(self) -> str:
        """`func (torch/_dynamo/convert_frame.py:2603)`, the path cut at its package root."""
        path = self.file.replace("\\", "/")
        for root in ("/site-packages/", "/dist-packages/"):
            if root in path:
                path = path.split(root, 1)[1]
        return f"{self.func} ({path}:{self.line})"


@dataclass(frozen=True)
class ThreadStack:
    """One thread: its id or name as the dump gives it, and frames innermost first."""

    ident: str
    frames: tuple[Frame, ...]
    state: str = ""  # py-spy's "active", "idle", "gil" (faulthandler gives none)


def parse(stacks_text: str) -> list[ThreadStack]:
    """Split a faulthandler or py-spy dump (or several, concatenated) into threads."""
    threads: list[ThreadStack] = []
    ident: Optional[str] = None
    state = ""
    frames: list[Frame] = []

    def close() -> None:
        """Store the thread being read."""
        if ident is not None:
            threads.append(ThreadStack(ident, tuple(frames), state))

    for raw in stacks_text.splitlines():
        head = _FH_THREAD.match(raw) or _PS_THREAD.match(raw) or _FH_STACK.match(raw)
        if head:
            close()
            name = head.groupdict().get("name") if head.re.pattern == _PS_THREAD.pattern else None
            ident = name or (head.group(1) if head.re.pattern != _FH_STACK.pattern else "thread")
            state = head.group("state") if head.re.pattern == _PS_THREAD.pattern else ""
            frames = []
            continue
        m = _FH_FRAME.match(raw) or _PS_FRAME.match(raw)
        if m and ident is not None:
            line = m.group("line")
            func = m.group("func").rsplit(".", 1)[-1]  # py-spy qualifies methods: ConvertFrame.__call__
            frames.append(Frame(m.group("file"), whole(line, 0), func, raw.strip()))
    close()
    return threads


def main_thread(stacks_text: str) -> Optional[ThreadStack]:
    """The thread py-spy names "MainThread" (faulthandler names none), or None."""
    return next((t for t in parse(stacks_text) if t.ident == "MainThread"), None)


def summarize(stacks_text: str, frames: int = 8) -> str:
    """Every thread with its innermost `frames` frames: the part of a long dump that shows who waits where."""
    out = []
    for t in parse(stacks_text):
        more = f"\n    ... {len(t.frames) - frames} outer frame(s)" if len(t.frames) > frames else ""
        out.append(f"thread {t.ident}:\n" + "\n".join(f"    {f.short()}" for f in t.frames[:frames]) + more)
    return "\n".join(out)


def _at(frame: Frame, path_end: str, funcs: tuple[str, ...]) -> bool:
    """Whether the frame is one of `funcs` in a file ending with `path_end`."""
    return frame.file.replace("\\", "/").endswith(path_end) and frame.func in funcs


# Frames that take dynamo's compile_lock; a thread stopped innermost in one is waiting for it.
_LOCK_SITES = (("_inductor/compile_fx.py", ("compile_fx_backward",)),
               ("_dynamo/convert_frame.py", ("__call__",)),
               ("_dynamo/__init__.py", ("reset", "reset_code_caches")))
# Frames that mean "inside a dynamo compile" (the holder of compile_lock).
_COMPILING = (("_dynamo/convert_frame.py", ("_compile", "compile_inner", "_compile_inner", "transform")),)
# The autograd engine: a thread stopped here waits for the engine's device threads.
_ENGINE = (("torch/autograd/__init__.py", ("grad", "backward")),
           ("torch/autograd/graph.py", ("_engine_run_backward",)))


def _innermost_python(thread: ThreadStack) -> Optional[Frame]:
    """The innermost frame that is not the threading module's own waiting code."""
    for f in thread.frames:
        if not f.file.replace("\\", "/").endswith("/threading.py"):
            return f
    return None


def waits_for_compile_lock(thread: ThreadStack) -> Optional[Frame]:
    """The lock site if the thread is blocked taking compile_lock (innermost frame is one)."""
    top = _innermost_python(thread)
    if top and any(_at(top, p, fs) for p, fs in _LOCK_SITES):
        return top
    return None


def holds_compile_lock_waiting_on_engine(thread: ThreadStack) -> Optional[tuple[Frame, Frame]]:
    """(engine frame, compile frame) if the thread compiles under dynamo and is stopped in the engine."""
    top = _innermost_python(thread)
    if not top or not any(_at(top, p, fs) for p, fs in _ENGINE):
        return None
    for f in thread.frames:
        if any(_at(f, p, fs) for p, fs in _COMPILING):
            return top, f
    return None


@dataclass(frozen=True)
class Cycle:
    """A compile-lock cycle: who holds the lock waiting on the engine, who waits for the lock."""

    holders: tuple[tuple[ThreadStack, Frame, Frame], ...]  # (thread, engine frame, compile frame)
    waiters: tuple[tuple[ThreadStack, Frame], ...]  # (thread, lock site)

    @property
    def threads(self) -> int:
        """How many threads take part."""
        return len(self.holders) + len(self.waiters)

    def headline(self) -> str:
        """One short sentence."""
        return (f"{self.threads} threads are deadlocked in torch.compile: compile_lock held while waiting on "
                "the autograd engine")

    def detail(self) -> list[str]:
        """One line per thread: what it holds or waits for, where."""
        out = [f"thread {t.ident} holds compile_lock (compiling in {c.short()}) and waits on the autograd engine "
               f"in {e.short()}" for t, e, c in self.holders]
        return out + [f"thread {t.ident} waits for compile_lock in {site.short()}" for t, site in self.waiters]

    def signature(self) -> tuple:
        """What stays the same while the threads stay stuck: each thread and where it waits."""
        return tuple(sorted([(t.ident, e.short()) for t, e, _ in self.holders] +
                            [(t.ident, s.short()) for t, s in self.waiters]))


def find_cycle(stacks_text: str) -> Optional[Cycle]:
    """The compile-lock cycle in a dump, or None."""
    threads = parse(stacks_text)
    holders = [(t, hw) for t in threads if (hw := holds_compile_lock_waiting_on_engine(t))]
    waiters = [(t, site) for t in threads if (site := waits_for_compile_lock(t))]
    holders = [(t, hw) for t, hw in holders if all(t is not w for w, _ in waiters)]
    if not holders or not waiters:
        return None
    return Cycle(tuple((t, e, c) for t, (e, c) in holders), tuple(waiters))


def classify(stacks_text: str) -> Optional[tuple[str, str]]:
    """("compile-deadlock", headline) when the dump shows the compile-lock cycle; None otherwise
    (`find_cycle` gives the per-thread detail)."""
    cycle = find_cycle(stacks_text)
    return (causes.COMPILE_DEADLOCK, cycle.headline()) if cycle else None
