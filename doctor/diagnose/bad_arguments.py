"""A job whose argument parser refused its command line: `bad-arguments`, naming the argument it refused and the
closest option the parser itself printed.

argparse (and jsonargparse, LightningCLI) print their usage and `PROG: error: unrecognized arguments: --epoch 3`
and exit 2; click prints `Error: No such option: --epoch` (with its own "Did you mean"). Nothing is guessed: the
valid options are the ones the parser listed in its usage or help on this very run.
"""

from __future__ import annotations

import difflib
import re
from typing import Optional

from dfdoctor import causes
from dfdoctor.model import Verdict
from dfdoctor.run.record import RunRecord

_REFUSED = [
    (re.compile(r"^(?P<prog>\S+): error: unrecognized arguments: (?P<args>.+)$", re.M | re.I), "unrecognized"),
    (re.compile(r"^(?P<prog>\S+): error: argument (?P<args>\S+): (?P<why>.+)$", re.M), "invalid"),
    (re.compile(r"^(?P<prog>\S+): error: the following arguments are required: (?P<args>.+)$", re.M), "required"),
    (re.compile(r"^Error: No such option: (?P<args>\S+)(?P<why>.*)$", re.M), "unrecognized"),
]
_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w.-]*)")


def bad_arguments(run: RunRecord) -> Optional[Verdict]:
    """The verdict for a job its own parser stopped (exit status 2 and the parser's error line), else None."""
    ex = run.exit or {}
    if ex.get("exit_code") != 2:
        return None
    text = run.stream("stderr")
    for rx, kind in _REFUSED:
        m = rx.search(text)
        if m:
            break
    else:
        return None
    usage = text[:m.start()]
    options = list(dict.fromkeys(o for o in _OPTION.findall(usage[usage.rfind("usage:"):] if "usage:" in usage
                                                            else usage) if o not in ("-h", "--help")))
    line = m.group(0).strip()
    where = m.groupdict().get("prog") or "the job's parser"
    evidence = [f"exit status 2 after {ex.get('wall_s')} s", f"the parser said: {line}"]
    if kind == "required":
        return Verdict("failed", causes.BAD_ARGUMENTS, f"{where} refused its command line: it needs "
                       f"{m.group('args')}.", f"Add {m.group('args')} to the command.", evidence)
    bad = [a for a in m.group("args").split() if a.startswith("-")] or m.group("args").split()[:1]
    hints = []
    for arg in bad:
        name = arg.split("=", 1)[0]
        close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
        if close and close[0] != name:
            value = arg.split("=", 1)[1] if "=" in arg else None
            hints.append((arg, close[0] + (f"={value}" if value is not None else "")))
    if options:
        evidence.append(f"the options its usage lists: {' '.join(options[:30])}" + (" ..." if len(options) > 30
                                                                                       else ""))
    what = f"{m.group('args').strip()}" if kind == "unrecognized" else f"{m.group('args')} ({m.group('why').strip()})"
    said = "does not know" if kind == "unrecognized" else "refused"
    summary = f"{where} {said} {what}: the job stopped before it started (exit status 2)."
    if hints:
        fix = "; ".join(f"write {good} instead of {arg}" for arg, good in hints) + \
            " (the closest option its usage lists; not tried)."
    elif kind == "invalid":
        fix = f"Give {m.group('args')} a value it accepts: {m.group('why').strip()}."
    else:
        fix = "Drop the arguments it does not know, or spell them as its usage lists them (`--help` shows them all)."
    return Verdict("failed", causes.BAD_ARGUMENTS, summary, fix, evidence)
