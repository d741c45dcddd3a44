"""target.reachable's one tiny command on a target (the ping), which a checked launch's relay runs first
(targets/relay.py): here, below both, so that the launch need not import the check."""

from __future__ import annotations

# Besides the ping and the interpreter: facts that tell targets apart when many are checked at once (one's
# kernel, one's driver, one's /dev/shm), each cheap and read the same way in busybox.
# Where the named interpreter is missing, the one that is there is said (`python` missing, /usr/bin/python3 there:
# the target answers, and the missing word is imports.smoke's finding, not "no python").
PING = ('echo dfdoctor-ping; command -v "$1" || { echo "no-python:$1"; command -v python3 || command -v python; }; '
        'echo "fact:kernel=$(uname -r 2>/dev/null)"; '
        'echo "fact:nvidia_driver=$(cat /sys/module/nvidia/version 2>/dev/null || echo none)"; '
        "echo \"fact:dev_shm_kb=$(df -Pk /dev/shm 2>/dev/null | awk 'NR==2{print $2}')\"")


def ping_argv(python: str) -> list[str]:
    """The ping as the target runs it."""
    return ["sh", "-c", PING, "sh", python]
