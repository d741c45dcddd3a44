"""A run folder's event logs, JSON lines: the recorder's record (record.jsonl, written where the job runs) and
dfdoctor's own notes about the run (launcher.jsonl: launched, detached, stacks sampled), written here masked."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from dfdoctor.redact import Redactor


def read(path: Path) -> list[dict[str, Any]]:
    """Events from a JSON-lines file; a torn last line (a crash mid-write) is skipped, not fatal."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    events = []
    for line in data.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if isinstance(ev, dict) and "event" in ev:
            events.append(ev)
    return events


def append(path: Path, masker: Redactor, name: str, data: dict[str, Any]) -> None:
    """Append event `name` to the log at `path`, its data masked by `masker` and stamped now. A note that cannot
    be written (a full disk) is dropped: it must not stop a launch whose job already runs."""
    data = masker.value(data)
    data.update(t=round(time.time(), 6), event=name)
    line = (json.dumps(data, default=str, sort_keys=True) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        os.write(fd, line)
    except OSError:
        pass
    finally:
        os.close(fd)
