"""Latency of one trivial probe per target, alternating targets so that machine noise hits all alike.

    .venv/bin/python tests/infra/bench_probe.py [ROUNDS]
"""

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
os.environ.setdefault("DFDOCTOR_SSH_CONFIG", "/var/lib/dfdoctor-infra/ssh_config")

from dfdoctor.context import Context  # noqa: E402
from dfdoctor.probe import run_probe  # noqa: E402
from dfdoctor.targets import parse_target, transport  # noqa: E402

PROBE = Path(__file__).with_name("echo_probe.py")
TARGETS = ["local", "lxc://200", "ssh://root@127.0.0.1:47022", "pct://root@127.0.0.1:47022/200"]


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    times: dict[str, list[float]] = {}
    for shared in (False, True):
        for _ in range(rounds):
            for spec in TARGETS:
                key = f"{spec}{' (shared connection)' if shared and spec.startswith(('ssh', 'pct')) else ''}"
                t = parse_target(spec)
                with (transport.connected(t) if shared else _null()):
                    start = time.monotonic()
                    out = run_probe(Context(target=t, python=sys.executable if t.runs_here else "python3"),
                                    PROBE, ["x"], timeout=10)
                    times.setdefault(key, []).append(time.monotonic() - start)
                assert out.payload and out.payload["args"] == ["x"], (spec, out.stderr)
    base = statistics.median(times["local"])
    for key, ts in times.items():
        med = statistics.median(ts)
        print(f"{key:50s} median {med * 1000:6.0f} ms  ({med / base:.1f}x local)")


class _null:
    """No shared connection."""

    def __enter__(self):
        """Nothing to open."""
        return None

    def __exit__(self, *a):
        """Nothing to close."""
        return False


if __name__ == "__main__":
    main()
