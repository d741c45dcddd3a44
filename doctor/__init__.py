"""dfdoctor: why did my training launch produce no log and no process?"""

# First, before any import of ours (each one widens the window): in the console script's process, a Ctrl-C
# during start-up is held for the command to answer with exit 130, never a traceback from inside an import. An
# inherited SIG_IGN is left as it is; so is another process that imports dfdoctor (doctor/ctrl_c.py), a
# `python -m dfdoctor.MODULE` among them
import _signal  # noqa: E402 (the C module: signal.py would import enum first)
import os as _os  # noqa: E402
import sys as _sys  # noqa: E402

# `python -m dfdoctor` too: while runpy finds the module, argv[0] is "-m", and the interpreter's own argv names it
_m = list(getattr(_sys, "orig_argv", ()))
_m = _sys.argv[:1] == ["-m"] and ("-mdfdoctor" in _m or "-m" in _m and _m[_m.index("-m") + 1:][:1] == ["dfdoctor"])
_m = _m or _os.path.basename(_sys.argv[0] if _sys.argv else "") == "dfdoctor"
if _m and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGINT})  # no thread runs yet: the process's mask
if _m:  # before the first dataclass and pattern: their code compiled ahead of time (doctor/*_code.py)
    from dfdoctor import dataclass_code as _code, regex_code as _re_code  # noqa: E402
    _code.use()
    _re_code.use()
    del _code, _re_code
del _signal, _os, _sys, _m

__version__ = "0.1.0"

from dfdoctor.model import OBSERVED, STATIC, Result, Status, error, fail, ok, skip, warn  # noqa: E402
from dfdoctor.registry import Check, check  # noqa: E402

__all__ = ["Check", "Result", "Status", "OBSERVED", "STATIC", "check", "ok", "warn", "fail", "skip", "error", "__version__"]
