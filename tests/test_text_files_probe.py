"""The probe that reads a target's requirements files: read only, regular files only, bounded, never blocking."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).resolve().parent.parent / "checks" / "probes" / "text_files_probe.py"


def ask(tmp_path: Path, paths: list[str], max_bytes: int = 1 << 20) -> dict:
    req = tmp_path / "in.json"
    req.write_text(json.dumps({"paths": paths, "max_bytes": max_bytes}))
    out = subprocess.run([sys.executable, str(PROBE)], env={**os.environ, "DFDOCTOR_PROBE_IN": str(req)},
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["files"]


def test_reads_regular_files_and_refuses_the_rest_without_opening_them(tmp_path):
    (tmp_path / "requirements.txt").write_text("numpy>=1.26\n")
    (tmp_path / "big.txt").write_text("x" * 2000)
    os.mkfifo(tmp_path / "fifo")  # opening it for reading would block for ever: it must not be opened
    got = ask(tmp_path, [str(tmp_path / n) for n in ("requirements.txt", "missing.txt", "fifo", "big.txt")] +
              [str(tmp_path)], max_bytes=1000)
    assert got[str(tmp_path / "requirements.txt")] == {"text": "numpy>=1.26\n"}
    assert got[str(tmp_path / "missing.txt")] == {"missing": True}
    assert got[str(tmp_path / "fifo")] == {"error": "not a regular file"}
    assert got[str(tmp_path)] == {"error": "not a regular file"}
    assert got[str(tmp_path / "big.txt")]["error"].startswith("larger than 1000 bytes")
