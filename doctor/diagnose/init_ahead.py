"""Whether a rank that holds no connection to the rendezvous store has its init_process_group still ahead.

A rank without that connection either never joined the process group or joined it and left it
(`destroy_process_group()` closes the connection, and a DDP job's ranks end one after another, each after
its own teardown). Only the first is a rank missing from the group. The rank's own line tells them apart where
its file calls init_process_group further down (`ddp_rank0_leaves.py`: held up at line 8, the call at line 11);
a rank past every such call, or in a file that makes none, or whose file cannot be read here, is not said to
be missing: a rank ending after its peers is what a finishing job looks like.
"""

from __future__ import annotations

from typing import Optional

from dfdoctor.diagnose.stackclass import Frame
from dfdoctor.lazy_re import compile_later

_CALL = compile_later(r"^[^#]*\binit_process_group\s*\(")
MAX_BYTES = 4 << 20  # a training script, not a data file


def ahead(frame: Optional[Frame]) -> bool:
    """The file of `frame` (the rank's own line) calls init_process_group at a line after the frame's."""
    if frame is None or frame.line <= 0:
        return False
    try:
        with open(frame.file, "rb") as f:
            text = f.read(MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return False
    return any(n > frame.line and _CALL.search(line) for n, line in enumerate(text.splitlines(), 1))
