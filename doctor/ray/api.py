"""Ray's HTTP APIs read with the standard library alone (dfdoctor never imports ray): the job API (/api/jobs/),
the state API (/api/v0/...), the cluster status (/api/cluster_status) and the log API (/api/v0/logs)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Optional

TIMEOUT_S = 5.0


class ApiError(Exception):
    """Ray answered with an HTTP error (`status`), or did not answer at all (`status` None)."""

    def __init__(self, status: Optional[int], said: str) -> None:
        super().__init__(said)
        self.status, self.said = status, said


class Api:
    """One Ray cluster's dashboard/job server at `base` (http://HEAD:8265), with its token when it has one."""

    def __init__(self, base: str, token: Optional[str] = None, timeout_s: float = TIMEOUT_S) -> None:
        self.base, self.token, self.timeout_s = base.rstrip("/"), token, timeout_s

    def _call(self, method: str, path: str, query: Optional[dict[str, Any]] = None) -> bytes:
        url = self.base + path + (("?" + urllib.parse.urlencode(query)) if query else "")
        req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                return r.read()
        except urllib.error.HTTPError as exc:
            body = exc.read()[:2000].decode(errors="replace")
            raise ApiError(exc.code, f"HTTP {exc.code} {exc.reason}: {body.strip()[:300]}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ApiError(None, str(getattr(exc, "reason", exc))) from None

    def get(self, path: str, **query: Any) -> Any:
        raw = self._call("GET", path, query or None)
        try:
            return json.loads(raw)
        except ValueError:
            raise ApiError(200, f"{path} answered something that is not JSON: {raw[:120]!r}") from None

    def text(self, path: str, **query: Any) -> str:
        return self._call("GET", path, query or None).decode(errors="replace")

    def post(self, path: str) -> Any:
        raw = self._call("POST", path)
        return json.loads(raw) if raw.strip() else {}

    # ---- the state API: its answers are {"result": bool, "data": {"result": {"result": [...]}}}
    def listed(self, what: str, **query: Any) -> list[dict[str, Any]]:
        """`/api/v0/WHAT?detail=1`: the rows (nodes, tasks, actors, placement_groups)."""
        doc = self.get(f"/api/v0/{what}", detail=1, limit=1000, **query)
        data = (doc.get("data") or {}).get("result") or {}
        rows = data.get("result") if isinstance(data, dict) else data
        return [r for r in rows or [] if isinstance(r, dict)]

    def job(self, job_id: str) -> dict[str, Any]:
        return self.get(f"/api/jobs/{urllib.parse.quote(job_id, safe='')}")

    def job_logs(self, job_id: str) -> str:
        return str(self.get(f"/api/jobs/{urllib.parse.quote(job_id, safe='')}/logs").get("logs") or "")
