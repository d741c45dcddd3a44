"""Whether a fix's detached start needs `; sleep 1` after it: only where a terminal reaches an lxc-attach.

lxc-attach (which `pct exec` execs) gives the attached command a terminal of its own when any of its own
stdin, stdout or stderr is a terminal (lxc's `stdfd_is_pty`), and ends that terminal's process group as the
command returns, which can catch the job between its fork and its `setsid()`. Without a terminal it waits for
the command and leaves the rest alone: measured here, `ssh HOST "pct exec 200 -- sh -c 'nohup setsid -f sleep
70 ...'"` left the sleep running 10 times out of 10, the same with `ssh -tt` 2 times out of 10
(tests/test_rehearse_pause.py repeats both). A fix line is typed at a prompt, so its first hop has a terminal;
ssh hands one on only when it asks for one there (the fix carries no `-t`, but a configuration may say
`RequestTTY yes`); `docker exec` without `-t` (a fix has none) hands on none; lxc-attach hands on what it had.
"""

from __future__ import annotations

from dfdoctor.rehearse import rewrite, sshlocal
from dfdoctor.targets.registry import kind_for

ATTACH_KINDS = ("pct", "lxc")  # the hops that are lxc-attach: their pause depends on a terminal


def needed(chain: tuple[rewrite.Hop, ...]) -> bool:
    """Whether the fix typed over `chain` needs the pause after its detached start."""
    terminal = True  # the fix is typed at a prompt
    for hop in chain:
        kind = kind_for(hop.kind)
        if kind.detach_needs_pause and (terminal or hop.kind not in ATTACH_KINDS):
            return True
        terminal = _hands_on_terminal(hop, terminal)
    return False


def _hands_on_terminal(hop: rewrite.Hop, terminal: bool) -> bool:
    """Whether the words after this hop of a fix line run with a terminal, given whether the hop had one."""
    if hop.kind in ATTACH_KINDS:
        return terminal
    if hop.kind == "ssh":
        words = rewrite.user_ssh_words(hop)
        asks = sshlocal.requests_tty(tuple(words[:-1]), words[-1]) if words else None
        return terminal and asks is not False  # where ssh -G cannot say, as if it asked
    return False  # docker exec without -t
