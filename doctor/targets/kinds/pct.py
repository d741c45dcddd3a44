"""`pct://[user@]host[:port]/VMID`: ssh to a Proxmox host, then `pct exec VMID --` into the container. `pct exec`
is `lxc-attach` underneath: it execs its words without a shell, and with a pty it ends the attached process
group as its command returns."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Iterator, Optional, Sequence

from dfdoctor.shellquote import quote
from dfdoctor.targets import transport
from dfdoctor.targets.kinds.ssh import ASCII_NUMBER, Ssh, parse_host, spell_host, ssh_typed
from dfdoctor.targets.registry import TargetKind, kind_for, program, usage
from dfdoctor.targets.target import Target


class Pct(TargetKind):
    """A Proxmox container, over ssh to its host."""

    scheme = "pct"
    usage = "pct://[user@]host[:port]/VMID"
    detach_needs_pause = True
    hop_tool = "pct"
    reached_over_ssh = True  # ssh to the Proxmox host, then pct exec
    hop_note = "pct exec = exec lxc-attach -n VMID -- CMD: no shell; the words are exec'd as they are"

    def parse(self, spec: str, rest: str) -> Target:
        """`[user@]host[:port]/VMID`, VMID a number."""
        user, host, port, path = parse_host(spec, rest, usage())
        vmid = path.strip("/")
        if not ASCII_NUMBER.fullmatch(vmid):
            raise ValueError(f"{spec!r}: pct targets end in /VMID, a number (e.g. pct://root@pve/200)")
        return Target(kind="pct", host=host, user=user, port=port, vmid=vmid)

    def spell(self, target: Target) -> str:
        """`pct://user@host:port/VMID`."""
        return f"{spell_host(target)}/{target.vmid}"

    def describe(self, target: Target) -> str:
        """`container VMID on user@host (ssh, then pct exec)`."""
        return f"container {target.vmid} on {target.destination} (ssh, then pct exec)"

    def reach_fix(self, target: Target) -> str:
        """ssh's fix, and the VMID."""
        return (f"Make `{ssh_typed(target, 'true')}` work without a prompt (keys, ~/.ssh/config, known_hosts: "
                "dfdoctor runs ssh with BatchMode=yes), and check the container's VMID (`pct list` on the host).")

    @contextlib.contextmanager
    def connected(self, target: Target) -> Iterator[Optional[str]]:
        """The host's ssh connection, shared as for ssh://."""
        with transport.ssh_master(target) as err:
            yield err

    def wrap(self, target: Target, argv: Sequence[str], *, tty: bool = False) -> list[str]:
        """ssh to the host, where `pct exec VMID -- ARGV` runs (pct execs the words as they are)."""
        return kind_for("ssh").wrap(target, ["pct", "exec", target.vmid or "", "--", *argv], tty=tty)

    def typed_line(self, target: Target, script: str) -> str:
        """`ssh user@host 'pct exec VMID -- sh -c SCRIPT'`."""
        return ssh_typed(target, f"pct exec {target.vmid} -- sh -c {quote(script)}")

    def transport_error(self, target: Target, returncode: Optional[int], stderr: str) -> Optional[str]:
        """ssh's words (pct's own failures are the command's exit)."""
        return Ssh.transport_error(self, target, returncode, stderr)

    def is_hop(self, argv: Sequence[str]) -> bool:
        """`pct exec ...`."""
        return program(argv) == "pct" and list(argv[1:2]) == ["exec"]

    def hop_split(self, argv: Sequence[str]) -> tuple[Optional[str], int]:
        """`pct exec VMID [--] CMD...`."""
        if len(argv) < 3:
            return None, len(argv)
        return argv[2], 4 if list(argv[3:4]) == ["--"] else 3

    def hop_target(self, outer: Target, prefix: Sequence[str]) -> Optional[str]:
        """After an ssh hop: pct://user@host:port/VMID."""
        if outer.kind == Ssh.scheme and len(prefix) > 2:
            return f"{spell_host(replace(outer, kind=self.scheme))}/{prefix[2]}"
        return None
