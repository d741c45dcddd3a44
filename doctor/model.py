"""The one result model every renderer reads: results, check records, the verdict and the report."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, Optional

SCHEMA = "dfdoctor/1"


class Status(str, enum.Enum):
    """What one check concluded; ordered from best to worst by `rank`."""

    OK = "ok"
    SKIP = "skip"
    WARN = "warn"
    FAIL = "fail"
    TIMEOUT = "timeout"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def __str__(self) -> str:
        return self.value


_RANK = {Status.OK: 0, Status.SKIP: 1, Status.WARN: 2, Status.FAIL: 3, Status.TIMEOUT: 4, Status.ERROR: 5}

# The statuses `--fail-on error` (the default) turns into exit code 1.
PROBLEMS = frozenset({Status.FAIL, Status.ERROR, Status.TIMEOUT})

# What a finding rests on. A static reading (code or a script read without running it) may warn; only an
# observation (something dfdoctor ran, opened or looked up and saw) or a reproduced failure may fail a check
# or block a launch. `Result` enforces it: a `fail` built on a static reading becomes a `warn` saying so.
OBSERVED = "observed"
STATIC = "static"
BASES = (OBSERVED, STATIC)
STATIC_NOTE = ("dfdoctor read this without running it, so it warns instead of failing: a static reading may "
               "warn; only an observed fact or a reproduced failure fails a check or blocks a launch")


@dataclass(frozen=True)
class Result:
    """One finding a check yields.

    `data` carries structured facts (a device list, a persistence matrix) for renderers that show tables;
    `evidence` is the short list of lines that support the finding. `basis` says what the finding rests on:
    `observed` (the default: a probe ran, a file was looked at, a process was seen) or `static` (code or a
    script read without running it). A `fail` on a static basis is turned into a `warn` here, with the reason
    in `details`, so no check can fail, and no launch be blocked, on a reading alone.
    """

    status: Status
    summary: str
    cause: Optional[str] = None
    details: str = ""
    fix: str = ""
    evidence: tuple[str, ...] = ()
    data: dict[str, Any] = field(default_factory=dict)
    basis: str = OBSERVED

    def __post_init__(self) -> None:
        if self.basis not in BASES:
            raise ValueError(f"basis must be one of {BASES}, not {self.basis!r}")
        if self.status == Status.FAIL and self.basis == STATIC:
            object.__setattr__(self, "status", Status.WARN)
            object.__setattr__(self, "details", (self.details + "\n" if self.details else "") + STATIC_NOTE)

    @property
    def observed(self) -> bool:
        """True when the finding rests on something dfdoctor saw, not only on reading code."""
        return self.basis == OBSERVED

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status.value, "cause": self.cause, "summary": self.summary,
                "details": self.details, "fix": self.fix, "evidence": list(self.evidence), "data": self.data,
                "basis": self.basis}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Result":
        return cls(status=Status(d["status"]), summary=d.get("summary") or "", cause=d.get("cause"),
                   details=d.get("details") or "", fix=d.get("fix") or "",
                   evidence=tuple(d.get("evidence") or ()), data=dict(d.get("data") or {}),
                   basis=d.get("basis") or OBSERVED)


def ok(summary: str, **kw: Any) -> Result:
    """Nothing wrong was found."""
    return Result(Status.OK, summary, **kw)


def warn(summary: str, cause: Optional[str] = None, **kw: Any) -> Result:
    """Something will probably hurt the launch, but need not stop it."""
    return Result(Status.WARN, summary, cause, **kw)


def fail(summary: str, cause: Optional[str] = None, **kw: Any) -> Result:
    """The launch will not work as things stand."""
    return Result(Status.FAIL, summary, cause, **kw)


def skip(summary: str, **kw: Any) -> Result:
    """The check does not apply here, or could not determine anything (said apart from failing)."""
    return Result(Status.SKIP, summary, **kw)


def error(summary: str, **kw: Any) -> Result:
    """The check itself broke; not a finding about the launch."""
    return Result(Status.ERROR, summary, **kw)


@dataclass
class CheckRecord:
    """The outcome of one check in one phase: its worst result plus every finding, timing and output."""

    id: str
    phase: str
    status: Status
    summary: str
    cause: Optional[str] = None
    details: str = ""
    fix: str = ""
    evidence: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    title: str = ""
    findings: list[Result] = field(default_factory=list)
    output: str = ""
    silenced: Optional[str] = None
    target: Optional[str] = None  # the row this record belongs to, in a report over many targets
    basis: str = OBSERVED  # the worst finding's: what it rests on (see Result)

    @property
    def observed(self) -> bool:
        """True when the record's worst finding rests on an observation (only those may block a launch)."""
        return self.basis == OBSERVED

    @classmethod
    def from_results(cls, check_id: str, phase: str, title: str, results: list[Result],
                     duration_s: float, output: str = "") -> "CheckRecord":
        worst = max(results, key=lambda r: r.status.rank)
        return cls(id=check_id, phase=phase, status=worst.status, summary=worst.summary, cause=worst.cause,
                   details=worst.details, fix=worst.fix, evidence=list(worst.evidence),
                   data=_merged_data(results), duration_s=round(duration_s, 3), title=title,
                   findings=results if len(results) > 1 else [], output=output, basis=worst.basis)

    def to_dict(self) -> dict[str, Any]:
        d = {"id": self.id, "phase": self.phase, "status": self.status.value, "cause": self.cause,
             "summary": self.summary, "details": self.details, "fix": self.fix,
             "duration_s": self.duration_s, "title": self.title, "evidence": self.evidence,
             "data": self.data, "findings": [r.to_dict() for r in self.findings],
             "output": self.output, "silenced": self.silenced, "basis": self.basis}
        if self.target is not None:
            d["target"] = self.target
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CheckRecord":
        return cls(id=d["id"], phase=d.get("phase") or "pre", status=Status(d["status"]),
                   summary=d.get("summary") or "", cause=d.get("cause"), details=d.get("details") or "",
                   fix=d.get("fix") or "", evidence=list(d.get("evidence") or []), data=dict(d.get("data") or {}),
                   duration_s=float(d.get("duration_s") or 0.0), title=d.get("title") or "",
                   findings=[Result.from_dict(r) for r in d.get("findings") or []],
                   output=d.get("output") or "", silenced=d.get("silenced"), target=d.get("target"),
                   basis=d.get("basis") or OBSERVED)


def _merged_data(results: list[Result]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for r in results:
        merged.update(r.data)
    return merged


class VerdictState(str, enum.Enum):
    """Where the launch stands: a verdict's `state`. Its value is the word dfdoctor/1 carries."""

    OK = "ok"
    RUNNING = "running"
    PENDING = "pending"  # a Slurm job waiting for its nodes
    FAILED = "failed"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


@dataclass
class Verdict:
    """The answer: what state the launch is in, why, and what to do. `state` takes a `VerdictState` or its word."""

    state: VerdictState
    cause: Optional[str] = None
    summary: str = ""
    fix: str = ""
    evidence: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.state = VerdictState(self.state)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["state"] = self.state.value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Verdict":
        return cls(state=d.get("state") or "unknown", cause=d.get("cause"), summary=d.get("summary") or "",
                   fix=d.get("fix") or "", evidence=list(d.get("evidence") or []))


@dataclass
class TargetRow:
    """One row of a report over many targets (or nodes): its own verdict and facts; its checks are the
    report's records whose `target` is this row's."""

    target: str
    verdict: Verdict
    environment: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "verdict": self.verdict.to_dict(), "environment": dict(self.environment),
                "duration_s": self.duration_s}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TargetRow":
        return cls(target=str(d["target"]), verdict=Verdict.from_dict(d.get("verdict") or {}),
                   environment=dict(d.get("environment") or {}), duration_s=float(d.get("duration_s") or 0.0))


@dataclass
class Report:
    """Everything one dfdoctor run found; `to_dict` is the `dfdoctor/1` JSON document."""

    tool_version: str
    target: str
    command: list[str]
    started_at: str
    finished_at: str
    verdict: Verdict
    checks: list[CheckRecord] = field(default_factory=list)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    run: dict[str, Any] = field(default_factory=lambda: {"dir": None, "pid": None, "exit_code": None,
                                                         "signal": None})
    environment: dict[str, Any] = field(default_factory=dict)
    mode: str = "check"  # check | launch | status
    targets: list[TargetRow] = field(default_factory=list)  # empty unless the report covers many targets
    # the user's launch line as typed, where `command` is the job dfdoctor found in it (issue 39: it was gone)
    command_as_typed: str = ""

    def checks_of(self, target: str) -> list[CheckRecord]:
        """The records of one row of a report over many targets."""
        return [c for c in self.checks if c.target == target]

    def to_dict(self) -> dict[str, Any]:
        d = {"schema": SCHEMA, "tool": {"name": "dfdoctor", "version": self.tool_version},
             "mode": self.mode, "target": self.target, "command": list(self.command),
             "started_at": self.started_at, "finished_at": self.finished_at,
             "verdict": self.verdict.to_dict(), "checks": [c.to_dict() for c in self.checks],
             "timeline": list(self.timeline), "run": dict(self.run), "environment": dict(self.environment)}
        if self.targets:
            d["targets"] = [t.to_dict() for t in self.targets]
        if self.command_as_typed:
            d["command_as_typed"] = self.command_as_typed
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Report":
        """The report a `dfdoctor/1` document describes; a document of another shape is a ValueError naming the
        first field that is wrong (a saved result may have been edited, truncated or written by something else)."""
        if not isinstance(d, dict):
            raise ValueError(f"not a {SCHEMA} document (a JSON {_json_type(d)}, not an object)")
        if d.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} document (schema: {d.get('schema')!r})")
        _conforms(d, _REPORT_SHAPE, "")
        return cls(tool_version=(d.get("tool") or {}).get("version") or "?", target=d.get("target") or "local",
                   command=list(d.get("command") or []), started_at=d.get("started_at") or "",
                   finished_at=d.get("finished_at") or "", verdict=Verdict.from_dict(d.get("verdict") or {}),
                   checks=[CheckRecord.from_dict(c) for c in d.get("checks") or []],
                   timeline=list(d.get("timeline") or []), run=dict(d.get("run") or {}),
                   environment=dict(d.get("environment") or {}), mode=d.get("mode") or "check",
                   targets=[TargetRow.from_dict(t) for t in d.get("targets") or []],
                   command_as_typed=d.get("command_as_typed") or "")


# The shape of a `dfdoctor/1` document, as far as dfdoctor reads it back: a field may be missing or null (its
# default is used), else it must have this type. A dict is an object with these fields; [T] a list of T.
_STR, _NUM, _ANY_OBJ = str, (int, float), dict


class _Required:
    """A field that must be there (not missing, not null), of type `kind`."""

    def __init__(self, kind: Any) -> None:
        self.kind = kind


_FINDING = {"status": _Required(_STR), "summary": _STR, "cause": _STR, "details": _STR, "fix": _STR,
            "evidence": [_STR], "basis": _STR, "data": _ANY_OBJ}
_VERDICT = {"state": _STR, "cause": _STR, "summary": _STR, "fix": _STR, "evidence": [_STR]}
_REPORT_SHAPE = {
    "schema": _STR, "tool": {"name": _STR, "version": _STR}, "mode": _STR, "target": _STR, "command": [_STR],
    "command_as_typed": _STR,
    "started_at": _STR, "finished_at": _STR, "verdict": _VERDICT,
    "checks": [{"id": _Required(_STR), "phase": _STR, "status": _Required(_STR), "summary": _STR, "cause": _STR,
                "details": _STR, "fix": _STR, "evidence": [_STR], "data": _ANY_OBJ, "duration_s": _NUM,
                "title": _STR, "findings": [_FINDING], "output": _STR, "silenced": _STR, "target": _STR,
                "basis": _STR}],
    "timeline": [{"t": _NUM, "event": _STR, "detail": _STR}],
    "run": _ANY_OBJ, "environment": _ANY_OBJ,
    "targets": [{"target": _Required(_STR), "verdict": _VERDICT, "environment": _ANY_OBJ, "duration_s": _NUM}],
}


def _json_type(value: Any) -> str:
    """JSON's word for a value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {str: "string", int: "number", float: "number", list: "array", dict: "object"}.get(type(value),
                                                                                                type(value).__name__)


def _conforms(value: Any, shape: Any, where: str) -> None:
    """Raise ValueError naming the first place where `value` does not have `shape` (see _REPORT_SHAPE)."""
    if isinstance(shape, _Required):
        if value is None:
            raise ValueError(f"{where} must be given (a {_json_type(shape.kind())})")
        shape = shape.kind
    if value is None:
        return
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            raise ValueError(f"{where or 'the document'} must be an object, not a {_json_type(value)}")
        for key, sub in shape.items():
            _conforms(value.get(key), sub, f"{where}.{key}" if where else key)
    elif isinstance(shape, list):
        if not isinstance(value, list):
            raise ValueError(f"{where} must be an array, not a {_json_type(value)}")
        for i, item in enumerate(value):
            if item is None:
                raise ValueError(f"{where}[{i}] must not be null")
            _conforms(item, shape[0], f"{where}[{i}]")
    elif not isinstance(value, shape) or isinstance(value, bool):
        raise ValueError(f"{where} must be a {_json_type(shape() if shape is not _NUM else 0)}, "
                         f"not a {_json_type(value)}")
