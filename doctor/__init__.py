"""dfdoctor: why did my training launch produce no log and no process?"""

__version__ = "0.1.0"

from dfdoctor.model import OBSERVED, STATIC, Result, Status, error, fail, ok, skip, warn  # noqa: E402
from dfdoctor.registry import Check, check  # noqa: E402

__all__ = ["Check", "Result", "Status", "OBSERVED", "STATIC", "check", "ok", "warn", "fail", "skip", "error", "__version__"]
