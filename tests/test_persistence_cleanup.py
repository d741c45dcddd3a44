"""The persistence probe's clean-up script against a sentinel that starts while the folder is being removed.

Round 21's CI: a trial's session started its sentinel late (tmux's server forks it when it gets to it); `rm -rf`
had already deleted the stop file but not yet the folder, so the sentinel beat into a folder rm could no longer
remove, and beat on. Here a stand-in `rm`, first on the PATH, opens that window on purpose: it deletes the stop file,
starts a sentinel the way every trial does (by the folder's own name), waits for its first beat and only then
removes the rest, slowly, as a loaded machine does."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from dfdoctor.targets import persistence

SLOW_RM = """#!/bin/sh
# rm -rf X, with a sentinel started by the folder's name after the stop file went and before the folder did
real=$(PATH=$REAL_PATH command -v rm)
[ "$1" = -rf ] || exec "$real" "$@"
x=$2
"$real" -f "$x/stop"
if [ -e "$ORIG/s" ]; then
  sh "$ORIG/s" late >/dev/null 2>&1 &
  i=0; while [ $i -lt 20 ] && [ ! -e "$ORIG/late.hb" ]; do sleep 0.05; i=$((i+1)); done
fi
find "$x" -mindepth 1 -delete 2>/dev/null
sleep 0.3
rmdir "$x" 2>/dev/null
exit 0
"""


def _sentinels_of(d: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if f"{d}/s".encode() in (proc / "cmdline").read_bytes():
                    pids.append(int(proc.name))
            except OSError:
                pass
    return pids


def test_a_sentinel_started_while_the_folder_is_removed_leaves_nothing(tmp_path):
    d = tmp_path / "dfdoctor-persist.test"
    d.mkdir()
    (d / "s").write_text(persistence.SENTINEL)
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "rm").write_text(SLOW_RM)
    (shims / "rm").chmod(0o755)
    env = dict(os.environ, PATH=f"{shims}:{os.environ['PATH']}", REAL_PATH=os.environ["PATH"], ORIG=str(d))
    planted = tmp_path / "dfdoctor-persist.test.gone"  # another user's link at a name a fixed rename would use
    planted.symlink_to(shims)
    cleanup = persistence.CLEANUP.format(tag="test", beat=persistence.BEAT_S)
    try:
        r = subprocess.run(["sh", "-c", cleanup, "sh", str(d)], env=env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        time.sleep(3 * persistence.BEAT_S)  # a sentinel still alive beats again in this time
        left = sorted(p.name for p in tmp_path.iterdir() if p not in (shims, planted))
        alive = _sentinels_of(d)
        assert not left and not alive, f"left: {left}; sentinels alive: {alive}"
        assert [p.name for p in shims.iterdir()] == ["rm"], "the folder was moved through the planted link"
    finally:
        for pid in _sentinels_of(d):
            os.kill(pid, 9)
