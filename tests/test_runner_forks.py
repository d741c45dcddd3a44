"""The check runner's workers (forked, one per check) each become subreapers of what their check starts; libc's
prctl for it is loaded once by the runner before it forks, not by every worker importing ctypes again (4 ms of CPU
each, a dozen workers per `check`: issue 45)."""

from __future__ import annotations

import json
import subprocess
import sys

RUN = r"""
import json, sys
from dfdoctor import runner
from dfdoctor.agent import ending
from dfdoctor.context import Context
from dfdoctor.model import ok
from dfdoctor.registry import check

@check("t.subreaper", title="asks whether its worker is a subreaper")
def subreaper(ctx):
    import ctypes
    state = ctypes.c_int()
    ctypes.CDLL(None).prctl(37, ctypes.byref(state), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
    return ok(f"subreaper={state.value}")

before = bool(ending._PRCTL)
records = runner.run_checks([subreaper] * 1, Context(), "pre")
print(json.dumps({"loaded_before": before, "loaded_after": bool(ending._PRCTL) and ending._PRCTL[0] is not None,
                  "said": [r.summary for r in records]}))
"""


def test_each_worker_is_a_subreaper_and_the_runner_loaded_prctl_for_them_once():
    out = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["said"] == ["subreaper=1"], seen
    assert not seen["loaded_before"] and seen["loaded_after"], seen  # loaded by the runner, before its fork
