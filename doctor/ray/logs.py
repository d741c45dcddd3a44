"""The runtime env's setup logs of every node (runtime_env_setup-*.log), read through the log API: a pip failure
shows there tens of seconds before the job API says RUNTIME_ENV_SETUP_FAILURE. Only lines written after the
watch began count (the same file holds earlier jobs' setups)."""

from __future__ import annotations

import re
from typing import Optional

from dfdoctor.ray.api import Api, ApiError
from dfdoctor.lazy_re import compile_later

# pip's own words ("ERROR: Could not find a version that satisfies ..."), else the runtime env agent's failure.
PIP_LINE = compile_later(r"(ERROR: (?:Could not|No matching|Invalid|Cannot|Ignored|Failed|Directory).*)")
AGENT_LINE = compile_later(r"(RuntimeEnvSetupError.*|Failed to (?:install|create|set up|setup) .*runtime.*env.*)",
                           re.I)
LINES = 2000


class SetupLogs:
    """The setup logs of the live nodes. `before()` (at a launch, before the submission) notes how long each is;
    `error()` gives the first failure line written since. Without `before()` (a status), none is read: the job
    API's message then holds the failure."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.start: Optional[dict[tuple[str, str], int]] = None  # (node, file) -> its lines before the launch

    def files(self) -> list[tuple[str, str]]:
        out = []
        for node in self.api.listed("nodes"):
            if node.get("state") != "ALIVE":
                continue
            doc = self.api.get("/api/v0/logs", node_id=node["node_id"], glob="runtime_env_setup*")
            for names in ((doc.get("data") or {}).get("result") or {}).values():
                out += [(node["node_id"], n) for n in names if "runtime_env_setup" in n]
        return out

    def before(self) -> None:
        try:
            self.start = {f: len(self._read(*f) or []) for f in self.files()}
        except (ApiError, KeyError, AttributeError):
            self.start = {}

    def error(self, packages: list[str]) -> tuple[str, str]:
        """(the failure line, the log it is in), or ("", ""). One log holds the setups of every job its worker
        serves, earlier jobs' retries included: a line is this job's when it names one of its pip `packages` as
        the job asks for it (`torch==2.1`, not another job's `torch==2.0`). No pip list: nothing to read."""
        wanted = [p.strip().lower().replace(" ", "") for p in packages if p.strip()]
        if self.start is None or not wanted:
            return "", ""
        try:
            files = self.files()
        except (ApiError, KeyError, AttributeError):
            return "", ""
        for f in files:
            for line in (self._read(*f) or [])[self.start.get(f, 0):]:
                m = PIP_LINE.search(line) or AGENT_LINE.search(line)
                if m and any(w in m[1].lower().replace(" ", "") for w in wanted):
                    return m[1].strip()[:500], f[1]
        return "", ""

    def _read(self, node: str, name: str) -> Optional[list[str]]:
        try:
            text = self.api.text("/api/v0/logs/file", node_id=node, filename=name, lines=LINES)
        except ApiError:
            return None
        return text.splitlines()
