"""Probe: the text of small regular files where the job runs (a target's requirements.txt and pyproject.toml).

Standard library only, read only. A path that is not a regular file (missing, a folder, a FIFO that would block
the reader, a device) is answered with why and never opened; a file over `max_bytes` is refused, not cut.
Input (JSON in the file $DFDOCTOR_PROBE_IN): {"paths": ["/srv/job/requirements.txt", ...], "max_bytes": N}.
Answer: {"files": {path: {"text": "..."} or {"missing": true} or {"error": "why"}}}.
"""

import os
import stat

from _probe_support import answer, request


def read(path, max_bytes):
    """One path's entry of the answer."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return {"missing": True}
    except OSError as exc:
        return {"error": exc.strerror or str(exc)}
    if not stat.S_ISREG(st.st_mode):
        return {"error": "not a regular file"}
    if st.st_size > max_bytes:
        return {"error": "larger than %d bytes (%d)" % (max_bytes, st.st_size)}
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        return {"error": exc.strerror or str(exc)}
    if len(data) > max_bytes:
        return {"error": "larger than %d bytes" % max_bytes}
    return {"text": data.decode("utf-8", "replace")}


def files(spec):
    """The answer's `files`, for a request {"paths": [...], "max_bytes": N} (deps_probe.py asks it too)."""
    max_bytes = int(spec.get("max_bytes") or 1 << 20)
    return dict((p, read(p, max_bytes)) for p in spec.get("paths") or [])


def main():
    answer({"files": files(request())})


if __name__ == "__main__":
    main()
