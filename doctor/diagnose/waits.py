"""What one process's main thread is doing, from its Python stack and its kernel wait: the vocabulary that
`stuck.py` builds a job's verdict from.

Python frames say where in torch a thread waits (rendezvous, a collective, a DataLoader queue); the kernel says
what a C call waits on (stdin, a file lock, a socket, a timer). Function names are matched, never line numbers:
those move between torch versions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from dfdoctor.diagnose.kernelwait import POLLS, READS, SELECTS, SLEEPS, KernelWait
from dfdoctor.diagnose.stackclass import Frame, ThreadStack, parse

RENDEZVOUS = "rendezvous"  # inside init_process_group, waiting for the other ranks
STORE_WAIT = "its rendezvous store"  # a RENDEZVOUS wait's detail when only the kernel's socket showed it
COLLECTIVE = "collective"  # inside all_reduce, barrier, ...
DATALOADER = "dataloader"  # the training loop waits for a DataLoader worker's batch
DATALOADER_WORKER = "dataloader-worker"  # a worker process (what it waits on is in `where`)
STDIN = "stdin"
LOCK = "lock"
SLEEP = "sleep"
SOCKET = "socket"
LISTEN = "listen"  # a server's accept(): it waits for a client to connect, nothing to download
COMPILE = "compile-workers"
CUDA_SYNC = "cuda-sync"
CHILD = "child"  # waits for a child process to end (a launcher, torchrun's agent)
AGENT = "agent"  # torchrun's agent in its monitor loop
IMPORT = "import"
WORKING = "working"  # on CPU, its stack moving
IDLE = "idle"  # waits on something not named above
GONE = "gone"

_RENDEZVOUS_FUNCS = {"init_process_group", "rendezvous", "_create_c10d_store", "_env_rendezvous_handler",
                     "_tcp_rendezvous_handler", "_new_process_group_helper", "_store_based_barrier",
                     "init_device_mesh", "_rendezvous_helper"}
_COLLECTIVES = {"all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "broadcast",
                "broadcast_object_list", "barrier", "monitored_barrier", "reduce", "reduce_scatter",
                "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather", "scatter", "gather_object",
                "scatter_object_list", "send", "recv", "wait"}
_LOADER_WAITS = {"_next_data", "_get_data", "_try_get_data", "__next__"}
_CUDA_SYNC = {"synchronize", "current_stream_synchronize"}


@dataclass(frozen=True)
class Wait:
    """What a process does: a kind above, the frame that shows it, and words for the rest."""

    kind: str
    where: Optional[Frame] = None  # the frame that shows the wait (the collective's, the user's line...)
    user: Optional[Frame] = None  # the innermost frame in the user's own code
    detail: str = ""  # `all_reduce`, `/tmp/x.lock held by pid 42`, `10.0.0.1:443`...

    def key(self) -> tuple:
        """What must stay the same between two looks for the wait to be a wait."""
        return (self.kind, self.detail, self.where.short() if self.where else None,
                self.user.short() if self.user else None)


def _path(f: Frame) -> str:
    return f.file.replace("\\", "/")


def is_library(f: Frame) -> bool:
    """A frame in the standard library, site-packages or torch, not in the user's own code."""
    p = _path(f)
    return ("/site-packages/" in p or "/dist-packages/" in p or "/lib/python3" in p or "/torch/" in p
            or p.startswith("<frozen"))


def user_frame(frames: tuple[Frame, ...]) -> Optional[Frame]:
    """The innermost frame in the user's own files."""
    return next((f for f in frames if not is_library(f)), None)


def _find(frames: tuple[Frame, ...], path_part: str, funcs: set[str]) -> Optional[Frame]:
    """The innermost frame in a file whose path contains `path_part` calling one of `funcs`."""
    return next((f for f in frames if path_part in _path(f) and f.func in funcs), None)


def main_of(stacks_text: str) -> Optional[ThreadStack]:
    """The main thread of a py-spy dump (the first thread when none is named MainThread)."""
    threads = parse(stacks_text)
    return next((t for t in threads if t.ident == "MainThread"), threads[0] if threads else None)


def main_frames(stacks_text: Optional[str]) -> tuple:
    """The main thread's frames of one look's stacks, innermost first; () where none were read."""
    main = main_of(stacks_text) if stacks_text else None
    return main.frames if main is not None else ()


def classify(stacks_text: str, kernel: KernelWait, store: Optional[str] = None) -> Wait:
    """The main thread's wait, torch's frames first (they say why), then the kernel's (they say on what).
    `store`: the process's rendezvous store, MASTER_ADDR:MASTER_PORT from its environment (None: not a rank)."""
    main = main_of(stacks_text)
    frames = main.frames if main else ()
    user = user_frame(frames)
    if any(f.func in _RENDEZVOUS_FUNCS and "torch/distributed" in _path(f) for f in frames):
        where = next(f for f in frames if f.func in _RENDEZVOUS_FUNCS and "torch/distributed" in _path(f))
        return Wait(RENDEZVOUS, where, user, "init_process_group")
    coll = _find(frames, "distributed/distributed_c10d.py", _COLLECTIVES)
    if coll:
        return Wait(COLLECTIVE, coll, user, coll.func)
    if _find(frames, "torch/utils/data/_utils/worker.py", {"_worker_loop"}):
        inner = frames[0] if frames else None
        return Wait(DATALOADER_WORKER, user or inner, user, _kernel_words(kernel))
    loader = _find(frames, "torch/utils/data/dataloader.py", _LOADER_WAITS)
    if loader:
        return Wait(DATALOADER, loader, user, "waits for a batch from its worker processes")
    if _find(frames, "torch/distributed/elastic/", {"_invoke_run", "_monitor_workers", "run", "launch_agent"}):
        return Wait(AGENT, frames[0] if frames else None, user, "")
    compile_wait = next((f for f in frames if "torch/_inductor/" in _path(f) and
                         ("async_compile" in _path(f) or "compile_worker" in _path(f))), None)
    if compile_wait:
        return Wait(COMPILE, compile_wait, user, "waits for torch.compile's worker processes")
    sync = next((f for f in frames if f.func in _CUDA_SYNC and "torch/cuda" in _path(f)), None)
    if sync:
        return Wait(CUDA_SYNC, sync, user, "torch.cuda.synchronize")
    if any("importlib._bootstrap" in _path(f) or "<frozen importlib" in _path(f) for f in frames[:1]) or \
            any(f.func == "_find_and_load" for f in frames):
        return Wait(IMPORT, frames[0] if frames else None, user, "")
    by_kernel = _by_kernel(kernel, frames, user)
    if by_kernel and by_kernel.kind == SOCKET and not frames and on_store(kernel, store):
        # no stack was read (no py-spy), but the socket's other end is the rank's own rendezvous store: what it
        # waits for there is the other ranks, never a download (a stack that was read says what it does itself)
        return Wait(RENDEZVOUS, None, None, f"{STORE_WAIT} {store}")
    if by_kernel:
        return by_kernel
    if main is not None and main.state in ("active", "gil"):
        return Wait(WORKING, frames[0] if frames else None, user, "")
    return Wait(IDLE, frames[0] if frames else None, user, _kernel_words(kernel))


def _by_kernel(k: KernelWait, frames: tuple[Frame, ...], user: Optional[Frame]) -> Optional[Wait]:
    """A wait named by the system call alone: stdin, a lock, a timer, a socket, a child."""
    top = frames[0] if frames else None
    on_input = k.syscall in READS | POLLS and (k.fd == 0 or (k.target or "").startswith("/dev/pts") or
                                              (k.target or "").startswith("/dev/tty"))
    if on_input and not k.is_socket:
        return Wait(STDIN, top, user, f"stdin ({k.target})")
    if k.syscall in ("flock", "fcntl") and k.target:
        held = f" held by pid {k.holder}" if k.holder else ""
        return Wait(LOCK, top, user, f"{k.target}{held}")
    if k.syscall in SLEEPS or (k.syscall in ("select", "pselect6") and k.fd is None and
                               any(f.func == "sleep" for f in frames[:2])):
        return Wait(SLEEP, top, user, "time.sleep" if frames else f"asleep in {k.syscall}")
    if k.is_socket and k.listening and k.syscall in POLLS | SELECTS | {"accept", "accept4"}:
        return Wait(LISTEN, top, user, k.listening)
    if k.is_socket and k.syscall in READS | POLLS | SELECTS | {"accept", "accept4"}:
        return Wait(SOCKET, top, user, k.peer or k.target or "a socket")
    if k.syscall in ("wait4", "waitid"):
        return Wait(CHILD, top, user, "")
    return None


def on_store(k: KernelWait, store: Optional[str]) -> bool:
    """The socket the kernel shows the process waiting on leads to the rendezvous store's port (its peer's port is
    MASTER_PORT; the address is left aside, as jobstacks.joined_store does: MASTER_ADDR may be a name)."""
    if not (store and k.is_socket and k.peer):
        return False
    return k.peer.rsplit(":", 1)[-1] == store.rsplit(":", 1)[-1]


def _kernel_words(k: KernelWait) -> str:
    """The kernel wait as words, for a wait the Python stack did not explain."""
    if k.syscall in SLEEPS:
        return f"asleep in {k.syscall}"
    return "" if k.syscall in ("running", "unknown") else k.words()
