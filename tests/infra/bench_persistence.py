"""Time the full persistence probe on the test infrastructure's targets (run after provision.sh).

    .venv/bin/python tests/infra/bench_persistence.py [ROUNDS]

Prints seconds per target for the full matrix (every strategy x tty x pause), with and without a shared
ssh connection, measured alternately so that machine noise hits both alike.
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
os.environ.setdefault("DFDOCTOR_SSH_CONFIG", "/var/lib/dfdoctor-infra/ssh_config")

from dfdoctor.targets import parse_target, persistence, transport  # noqa: E402


def once(spec: str, shared: bool) -> float:
    """One full probe; returns its wall time."""
    t = parse_target(spec)
    start = time.monotonic()
    if shared:
        with transport.connected(t):
            out = persistence.run(t)
    else:
        out = persistence.run(t)
    assert out.error is None and out.left_behind == 0, (out.error, out.left_behind)
    return time.monotonic() - start


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for spec in ("pct://root@127.0.0.1:47022/200", "ssh://root@127.0.0.1:47022"):
        times = {True: [], False: []}
        for _ in range(rounds):
            for shared in (True, False):
                times[shared].append(once(spec, shared))
        a, b = statistics.median(times[True]), statistics.median(times[False])
        print(f"{spec}: shared connection {a:.1f} s, separate connections {b:.1f} s (ratio {b / a:.2f}), "
              f"rounds {rounds}")


if __name__ == "__main__":
    main()
