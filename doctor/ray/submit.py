"""A `ray job submit` line read as Ray's CLI reads it: its options, the address it talks to (--address, else
RAY_API_SERVER_ADDRESS, else RAY_ADDRESS, else http://127.0.0.1:8265), its token, and the entrypoint after `--`."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

DEFAULT_ADDRESS = "http://127.0.0.1:8265"
# `ray job submit`'s options that take no value (every other one takes one).
_FLAGS = {"--no-wait", "--verbose", "-v", "--disable-usage-stats", "--help"}


@dataclass
class RaySubmission:
    """One `ray job submit` line: its options as typed, the entrypoint, and what they mean."""

    argv: list[str]
    options: dict[str, str] = field(default_factory=dict)
    entrypoint: list[str] = field(default_factory=list)
    address: str = DEFAULT_ADDRESS
    address_from: str = "Ray's default"
    cwd: Path = Path(".")

    @property
    def working_dir(self) -> Optional[Path]:
        """--working-dir (or the runtime env's working_dir) as a local folder; None when none is given."""
        wd = self.options.get("--working-dir") or self.runtime_env.get("working_dir")
        if not wd or "://" in str(wd):
            return None
        p = Path(wd).expanduser()
        return p if p.is_absolute() else self.cwd / p

    @property
    def runtime_env(self) -> dict[str, Any]:
        """The runtime env as Ray's CLI builds it before it submits (dashboard_sdk.parse_runtime_env_args): the YAML
        file --runtime-env names, read here, or --runtime-env-json; {} where neither is given or it cannot be read
        (runtime_env_problem then says why)."""
        return self._runtime_env_read()[0]

    @property
    def runtime_env_problem(self) -> str:
        """Why Ray's CLI would refuse the runtime env before it submits anything ('' when it would not)."""
        return self._runtime_env_read()[1]

    def _runtime_env_read(self) -> tuple[dict[str, Any], str]:
        if "_runtime_env_cache" not in self.__dict__:  # read once: the file is the user's, it may change under us
            self.__dict__["_runtime_env_cache"] = _read_runtime_env(self.options.get("--runtime-env"),
                                                                    self.options.get("--runtime-env-json"), self.cwd)
        return self.__dict__["_runtime_env_cache"]

    def number(self, option: str) -> float:
        try:
            return float(self.options.get(option) or 0)
        except ValueError:
            return 0.0

    @property
    def wants(self) -> dict[str, float]:
        """The entrypoint's own resource request (--entrypoint-num-cpus/-gpus), as Ray names its resources."""
        out = {"CPU": self.number("--entrypoint-num-cpus"), "GPU": self.number("--entrypoint-num-gpus")}
        try:
            out.update({k: float(v) for k, v in json.loads(self.options.get("--entrypoint-resources") or "{}").items()})
        except (ValueError, AttributeError, TypeError):
            pass
        return {k: v for k, v in out.items() if v > 0}

    @property
    def script(self) -> Optional[str]:
        """The Python script the entrypoint runs (`python train.py ...`), as written."""
        words = list(self.entrypoint)
        if len(words) == 1 and " " in words[0]:  # an entrypoint given as one quoted string
            words = words[0].split()
        if words and Path(words[0]).name.startswith("python") and len(words) > 1 and words[1].endswith(".py"):
            return words[1]
        return None


def _read_runtime_env(path: Optional[str], as_json: Optional[str], cwd: Path) -> tuple[dict[str, Any], str]:
    """(the runtime env, '') or ({}, why Ray's CLI would fail on it), in the order its CLI reads them."""
    if path is not None and as_json is not None:
        return {}, "Ray's CLI takes only one of --runtime-env and --runtime-env-json, and refuses the line"
    if path is not None:
        file = Path(path).expanduser()
        file = file if file.is_absolute() else cwd / file
        try:
            text = file.read_text()
        except OSError as exc:
            return {}, f"--runtime-env {file} cannot be read here ({exc.strerror or exc}), where Ray's CLI reads it"
        try:
            import yaml  # Ray's CLI reads the file with PyYAML; dfdoctor does not need it otherwise
        except ImportError:
            return {}, ""  # not read: the check says so (precheck.runtime_env)
        try:
            env = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            return {}, f"--runtime-env {file} is not valid YAML: " + " ".join(str(exc).split())
        where = f"--runtime-env {file}"
    elif as_json is not None:
        try:
            env = json.loads(as_json)
        except ValueError as exc:
            return {}, f"--runtime-env-json is not valid JSON: {exc}"
        where = "--runtime-env-json"
    else:
        return {}, ""
    if env is None:
        return {}, ""  # an empty file: Ray submits with no runtime env
    if not isinstance(env, dict):
        return {}, f"{where} holds a {type(env).__name__}, where Ray's CLI needs a mapping (pip:, working_dir:, ...)"
    return env, ""


def is_ray_submit(argv: Sequence[str]) -> bool:
    return len(argv) >= 3 and Path(argv[0]).name == "ray" and list(argv[1:3]) == ["job", "submit"]


def parse(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> RaySubmission:
    """Read `ray job submit [OPTIONS] -- ENTRYPOINT...` (argv starts with ray)."""
    sub = RaySubmission(argv=list(argv), cwd=cwd)
    words = list(argv[3:])
    i = 0
    while i < len(words):
        w = words[i]
        if w == "--":
            sub.entrypoint = words[i + 1:]
            break
        if not w.startswith("-"):
            sub.entrypoint = words[i:]
            break
        name, eq, value = w.partition("=")
        if eq:
            sub.options[name] = value
        elif name in _FLAGS:
            sub.options[name] = ""
        elif i + 1 < len(words):
            sub.options[name] = words[i + 1]
            i += 1
        i += 1
    for source, value in (("--address", sub.options.get("--address")),
                          ("RAY_API_SERVER_ADDRESS", env.get("RAY_API_SERVER_ADDRESS")),
                          ("RAY_ADDRESS", env.get("RAY_ADDRESS"))):
        if value:
            sub.address, sub.address_from = value, source
            break
    return sub


def http_address(address: str) -> str:
    """The job API's base URL for an address as Ray's CLI takes it (no scheme: http)."""
    a = address.rstrip("/")
    return a if a.startswith(("http://", "https://")) else f"http://{a}"


def token(env: Mapping[str, str]) -> Optional[str]:
    """Ray's auth token as its own tools find it: RAY_AUTH_TOKEN, the file RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token."""
    if env.get("RAY_AUTH_TOKEN"):
        return env["RAY_AUTH_TOKEN"].strip()
    home = env.get("HOME") or os.path.expanduser("~")
    for path in (env.get("RAY_AUTH_TOKEN_PATH"), os.path.join(home, ".ray", "auth_token")):
        if path:
            try:
                return Path(path).read_text().strip() or None
            except OSError:
                continue
    return None


def with_id(sub: RaySubmission, submission_id: str) -> list[str]:
    """The line as typed, told not to wait (dfdoctor watches) and given the id dfdoctor watches it by (unless
    the user gave one)."""
    words = list(sub.argv[:3])
    if "--no-wait" not in sub.options:
        words.append("--no-wait")
    if "--submission-id" not in sub.options and "--job-id" not in sub.options:
        words += ["--submission-id", submission_id]
    return words + list(sub.argv[3:])


def submission_id(sub: RaySubmission, default: str) -> str:
    return sub.options.get("--submission-id") or sub.options.get("--job-id") or default
