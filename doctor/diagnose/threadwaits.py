"""Every thread of a process, read from a look's all-thread dump: what each waits on (an Event, a Condition, a
`join`, a lock, a queue or pipe read, `accept`), the user's line where, and the locks it holds there.

The watch's older reading (waits.py) looks at the main thread only: a main thread waiting on an Event while
nothing else can set it looked no different from one waiting for a worker thread that computes. Here each
thread is read, so that a job whose every thread waits, and stays so between looks, can be named (stuck.py).

py-spy shows no C frame: a `lock.acquire()` or `with lock:` shows as the user's own line. That line is read from
the user's file (it is on this machine) to say which lock, and the `with` blocks around it to say which locks the
thread holds: two threads each holding the lock the other waits for are a lock-order deadlock.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import Optional

from dfdoctor.diagnose.stackclass import Frame, ThreadStack, parse
from dfdoctor.diagnose.waits import is_library, user_frame

# kinds of a thread's wait
EVENT, CONDITION, BARRIER, JOIN, LOCK, QUEUE, PIPE, ACCEPT = (
    "Event", "Condition", "Barrier", "join", "lock", "queue", "pipe", "accept")
SLEEP, WORKING, OTHER = "sleep", "working", "other"
# waits only another thread or process of the job can end (a socket's accept waits for the world: not here)
INNER = frozenset({EVENT, CONDITION, BARRIER, JOIN, LOCK, QUEUE, PIPE})

# (file ending, method) -> kind; the innermost match wins, methods as py-spy qualifies them or bare (faulthandler)
_LIBRARY_WAITS = (
    ("threading.py", ("Event.wait",), EVENT),
    ("threading.py", ("Barrier.wait", "Barrier._wait"), BARRIER),
    ("threading.py", ("_wait_for_tstate_lock", "Thread.join", "join"), JOIN),
    ("queue.py", ("Queue.get", "Queue.put"), QUEUE),
    ("multiprocessing/queues.py", ("Queue.get", "JoinableQueue.join", "SimpleQueue.get"), PIPE),
    ("multiprocessing/connection.py", ("_recv", "_recv_bytes", "recv_bytes", "recv", "Connection._recv",
                                       "Connection._recv_bytes", "_ConnectionBase.recv_bytes",
                                       "_ConnectionBase.recv", "Connection.recv"), PIPE),
    ("multiprocessing/synchronize.py", ("SemLock.__enter__", "Lock.__enter__", "acquire"), LOCK),
    ("socket.py", ("socket.accept", "accept"), ACCEPT),
    ("threading.py", ("Condition.wait", "wait"), CONDITION),
)
_WORDS = {EVENT: "an Event", CONDITION: "a Condition", BARRIER: "a Barrier", JOIN: "a join of another thread",
          QUEUE: "a queue.get()", PIPE: "a read of a multiprocessing pipe (Queue.get)", ACCEPT: "accept()"}


@dataclass(frozen=True)
class ThreadWait:
    """One thread's wait: its kind, the user's line, and (for a lock) which lock, and the locks it holds."""

    thread: str  # "MainThread", "loader" (py-spy's name), or its id
    kind: str
    at: Optional[Frame]  # the innermost frame of the user's own code
    lock: str = ""  # the lock expression it waits for (`model`), when its line says
    holds: tuple[str, ...] = ()  # the locks of the `with` blocks around its lines

    def words(self) -> str:
        """`waits on an Event at x.py:5`, `waits for lock `model` at x.py:13 holding `data``."""
        where = f" at {self.at.short()}" if self.at else ""
        if self.kind == LOCK:
            held = f", holding {', '.join(f'`{h}`' for h in self.holds)}" if self.holds else ""
            return f"waits for lock {f'`{self.lock}`' if self.lock else '(a lock)'}{where}{held}"
        return f"waits on {_WORDS.get(self.kind, self.kind)}{where}"


def _name(t: ThreadStack) -> str:
    return t.ident


def _matches(f: Frame, ending: str, funcs: tuple[str, ...]) -> bool:
    """The frame is one of `funcs` in a file ending so. A bare name (faulthandler's, py-spy's on some Pythons)
    is qualified with its class from the file itself (`wait` at threading.py:629 is `Event.wait`)."""
    if not f.file.replace("\\", "/").endswith(ending):
        return False
    bare = {n for n in funcs if "." not in n}
    return f.func in funcs or qualified(f) in funcs or ("." in f.func and f.func.split(".")[-1] in bare) or \
        (f.func in bare and "." not in qualified(f))


def qualified(f: Frame) -> str:
    """`Class.func` for a frame named by its bare function, read from its file (the name itself when the file
    cannot be read or the function is no method)."""
    if "." in f.func:
        return f.func
    tree = _tree(f.file)
    if tree is None:
        return f.func
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for fn in cls.body:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == f.func and \
                    fn.lineno <= f.line <= (fn.end_lineno or fn.lineno):
                return f"{cls.name}.{fn.name}"
    return f.func


def _library_wait(frames: tuple[Frame, ...]) -> Optional[str]:
    """The kind of wait the library frames inside the user's innermost line show (None: none of those known);
    the most telling first (an Event waits in a Condition: it is an Event)."""
    inner = []
    for f in frames:
        if not is_library(f):
            break
        inner.append(f)
    for ending, funcs, kind in _LIBRARY_WAITS:
        if any(_matches(f, ending, funcs) for f in inner):
            return kind
    return None


def read(t: ThreadStack, syscall: str = "", sources: Optional[dict] = None) -> ThreadWait:
    """One thread's wait from its frames (`syscall`: the kernel's word for it, where known: the main thread's;
    `sources`: the user's files as they are where the process runs, None when it runs here)."""
    user = user_frame(t.frames)
    if t.state in ("active", "gil"):
        return ThreadWait(_name(t), WORKING, user)
    kind = _library_wait(t.frames)
    if kind is not None:
        return ThreadWait(_name(t), kind, user)
    if not t.frames or user is None or t.frames[0] != user:
        return ThreadWait(_name(t), OTHER, user)
    said = source_wait(user.file, user.line, sources)
    if said is None or syscall in ("clock_nanosleep", "nanosleep"):
        return ThreadWait(_name(t), SLEEP if said == SLEEP or "sleep" in syscall else OTHER, user)
    kind, lock = said
    holds = tuple(h for f in t.frames if not is_library(f) for h in held_at(f.file, f.line, sources))
    return ThreadWait(_name(t), kind, user, lock, holds)


def threads_of(stacks_text: str, main_syscall: str = "", sources: Optional[dict] = None) -> list[ThreadWait]:
    """Every thread of one dump, read (`sources`: as for `read`)."""
    out = []
    for t in parse(stacks_text):
        out.append(read(t, main_syscall if t.ident == "MainThread" else "", sources))
    return out


def signature(stacks_text: str) -> tuple:
    """What must stay the same between two looks for a process to be still: each thread's frames."""
    return tuple(sorted((t.ident, tuple((f.file, f.line, f.func) for f in t.frames)) for t in parse(stacks_text)))


# ---- the user's own line, read from the file ------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _tree(path: str) -> Optional[ast.Module]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None


@functools.lru_cache(maxsize=64)
def _tree_of_text(path: str, text: str) -> Optional[ast.Module]:
    try:
        return ast.parse(text, path)
    except (SyntaxError, ValueError):
        return None


def _tree_in(path: str, sources: Optional[dict]) -> Optional[ast.Module]:
    """The file's syntax tree: from `sources` for a process that runs elsewhere (a path there may name another
    file here, or none), else read here."""
    if sources is None:
        return _tree(path)
    text = sources.get(path)
    return _tree_of_text(path, text) if isinstance(text, str) else None


def _withs(path: str, sources: Optional[dict] = None) -> list[ast.With]:
    tree = _tree_in(path, sources)
    return [n for n in ast.walk(tree) if isinstance(n, ast.With)] if tree is not None else []


def source_wait(path: str, line: int, sources: Optional[dict] = None) -> Optional[tuple[str, str]]:
    """(kind, lock) that the statement at `path:line` waits in: a `with X:` or `X.acquire()` (a lock), a
    `.wait()` (a Condition or Event), a `sleep(` (time.sleep); None when the file or line says nothing."""
    tree = _tree_in(path, sources)
    if tree is None:
        return None
    for n in _withs(path, sources):
        if n.lineno == line and n.items:
            return LOCK, ast.unparse(n.items[0].context_expr)
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and getattr(n, "lineno", None) == line and isinstance(n.func, ast.Attribute):
            if n.func.attr == "acquire":
                return LOCK, ast.unparse(n.func.value)
            if n.func.attr == "sleep":
                return SLEEP, ""
        if isinstance(n, ast.Call) and getattr(n, "lineno", None) == line and isinstance(n.func, ast.Name) \
                and n.func.id == "sleep":
            return SLEEP, ""
    return None


def held_at(path: str, line: int, sources: Optional[dict] = None) -> list[str]:
    """The locks of the `with` blocks whose body holds `path:line` (the thread holds them there)."""
    out = []
    for n in _withs(path, sources):
        if n.body and n.body[0].lineno <= line <= (n.end_lineno or n.lineno) and n.lineno != line:
            out += [ast.unparse(i.context_expr) for i in n.items]
    return out


def lock_cycle(waits: list[ThreadWait]) -> Optional[list[ThreadWait]]:
    """Threads that each hold the lock the next one waits for, round to the first (None: no such cycle)."""
    lockers = [w for w in waits if w.kind == LOCK and w.lock]
    holder = {h: w for w in lockers for h in w.holds}
    for start in lockers:
        chain, w = [start], holder.get(start.lock)
        while w is not None and w not in chain:
            chain.append(w)
            w = holder.get(w.lock)
        if w is start and len(chain) >= 2:
            return chain
    return None
