"""Ctrl-C at any moment of a `dfdoctor` command: exit 130 and one line, never a Python traceback.

Python turns SIGINT into KeyboardInterrupt wherever it lands. Inside the imports of start-up (some 600 modules, a
third of a second on a quiet machine) it escaped as a traceback and the process died of the signal (exit -2); in
the moments after the command had answered, the same. So:
- the console script's process (and `python -m dfdoctor`'s) holds SIGINT blocked from the package's first line
  (dfdoctor/__init__.py, the first statements: each import before them would widen the window) until the command
  starts (`command`, run by cli/main.run): one that came meanwhile is delivered there, as a KeyboardInterrupt the
  command answers with 130 as after start-up;
- from then on, its handler raises KeyboardInterrupt only inside the command (its frame on the interrupted stack:
  the command's `finally` blocks end what it started), and outside it only notes the Ctrl-C (`exit_code`: 130).
  Deciding by the interrupted stack leaves no moment between a switch and the code it guards.
Before the package's first line, the interpreter's own start-up (its `site`, the script's first line) runs no code
of ours: a Ctrl-C there is Python's. A SIGINT ignored by inheritance (nohup, a script's `cmd &`) stays ignored:
Unix's convention. Another process that imports dfdoctor (a probe, a test) keeps Python's own handling.
"""

from __future__ import annotations

import _signal  # the C module: signal.py would import enum first, a wider window than the one closed here
import _thread
import os
import sys
import time
from typing import Any, Callable, Optional

SCRIPT = "dfdoctor"  # the console script's name (setup.cfg); argv[0] of its process
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command ended by Ctrl-C
_MAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")  # `python -m dfdoctor`'s argv[0]


class _State:
    noted = False  # a Ctrl-C came outside the command


def held() -> bool:
    """SIGINT is blocked in the console script's process (or `python -m dfdoctor`'s, whose argv[0] is then its
    __main__.py): held since the package's first line."""
    argv0 = sys.argv[0] if sys.argv else ""
    return (os.path.basename(argv0) == SCRIPT or os.path.abspath(argv0) == _MAIN) and \
        _signal.SIGINT in _signal.pthread_sigmask(_signal.SIG_BLOCK, set())


def command(run: Callable[[], Any]) -> Any:
    """Run the command (`run`) answering Ctrl-C: a Ctrl-C held since start-up is raised here, as KeyboardInterrupt,
    before it begins; one during it is raised where it lands; one after it is only noted."""
    if held():
        sys.unraisablehook = _unraisable_hook(sys.unraisablehook)
        _signal.signal(_signal.SIGINT, _on_sigint)
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {_signal.SIGINT})  # a held Ctrl-C: KeyboardInterrupt now
    return run()


def exit_code(code: int) -> int:
    """The process's exit status: 130 when a Ctrl-C came once the command had answered."""
    return INTERRUPTED if _State.noted else code


def _unraisable_hook(before: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """sys.unraisablehook: a Ctrl-C raised where Python cannot raise (an at-fork hook such as logging's, run as
    subprocess forks; a __del__) would be printed as "Exception ignored" and lost, the command running on to the end
    and exit 0. It is sent again from a thread, a moment later, to land where the command answers it (or, again
    somewhere it cannot, to be sent again). Any other unraisable exception goes to the hook that was there."""
    def hook(unraisable: Any) -> None:
        if unraisable.exc_type is KeyboardInterrupt and _raised_by_us(unraisable.exc_traceback):
            _thread.start_new_thread(_send_again, ())
            return
        before(unraisable)
    return hook


def _raised_by_us(tb: Any) -> bool:
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code is _on_sigint.__code__


def _send_again() -> None:
    time.sleep(0.005)  # (out of the hook that swallowed it, most likely: if not, it is swallowed and sent again)
    os.kill(os.getpid(), _signal.SIGINT)


def _on_sigint(signum: int, frame: Optional[Any]) -> None:
    """KeyboardInterrupt inside the command (as Python's own handler), a note outside it."""
    f = frame
    while f is not None:
        if f.f_code is command.__code__:
            raise KeyboardInterrupt
        f = f.f_back
    _State.noted = True
