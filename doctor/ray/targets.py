"""`--target ray://HEAD[:PORT]`: a Ray cluster named as the place a job runs.

In Ray, `ray://HOST:10001` is the address of the Ray *Client* server (a driver elsewhere that `ray.init`s into the
cluster). dfdoctor's `ray://HEAD[:PORT]` names the head whose *job server* (the dashboard, 8265 by default) takes
the job: `launch --target ray://HEAD -- python train.py` submits `ray job submit --address http://HEAD:8265
--working-dir . -- python train.py` (this folder sent with it, as `--working-dir .` sends it), and a `ray job
submit` line given with the target gets that address. Port 10001 is refused with the difference said."""

from __future__ import annotations

from pathlib import Path

from dfdoctor.errors import UsageError
from dfdoctor.ray.submit import http_address, is_ray_submit, parse

JOB_SERVER_PORT = 8265
CLIENT_PORT = 10001  # Ray Client's port: what `ray://` means to Ray itself


def address_of(spec: str) -> str:
    """The job server's URL a `ray://HEAD[:PORT]` spec names."""
    rest = spec.split("://", 1)[1].strip().rstrip("/")
    host, colon, port = rest.rpartition(":") if rest.count(":") == 1 else (rest, "", "")
    if not host or "/" in host or "@" in host or (colon and not port.isdigit()):
        raise UsageError(f"--target {spec}: not a Ray head; give ray://HEAD or ray://HEAD:PORT (its job server's "
                         f"port, {JOB_SERVER_PORT} by default)")
    if colon and int(port) == CLIENT_PORT:
        raise UsageError(f"--target {spec}: {CLIENT_PORT} is Ray Client's port (what `ray://` means to Ray); "
                         f"dfdoctor submits through the head's job server: --target ray://{host} (port "
                         f"{JOB_SERVER_PORT}) or ray://{host}:PORT with its --dashboard-port")
    return f"http://{host}:{port if colon else JOB_SERVER_PORT}"


def spelled(address: str) -> str:
    """The `--target` that names the cluster whose job server is at `address` (`ray://HEAD:PORT`); an address that
    no such spec can carry (https, a path) as its job API's URL."""
    url = http_address(address)
    rest = url.split("://", 1)[1]
    plain = url.startswith("http://") and ":" in rest and not any(c in rest for c in "/@[")  # ray:// means 8265
    return f"ray://{rest}" if plain else url


def line_for(spec: str, command: list[str]) -> list[str]:
    """The `ray job submit` line that runs `command` on the cluster `spec` names."""
    address = address_of(spec)
    if not command:
        raise UsageError(f"--target {spec}: give the job's command after --, e.g. -- python train.py")
    if not is_ray_submit(command):
        return ["ray", "job", "submit", "--address", address, "--working-dir", ".", "--", *command]
    given = parse(command, Path("."), {}).options.get("--address")
    if given and given.rstrip("/") != address:
        raise UsageError(f"--target {spec} and the line's --address {given} name two clusters: give one")
    return list(command) if given else [*command[:3], "--address", address, *command[3:]]
