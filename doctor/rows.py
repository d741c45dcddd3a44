"""A report over many targets (or nodes): one row each, one verdict for all, and what sets a row apart.

Every renderer shows the same three things: the rows (each target's own verdict), what differs between them
(a check whose outcome is not the same everywhere, a fact one target reports differently), then each row's
checks. `differences` is the single place that decides what "differs" means.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Optional

from dfdoctor.model import CheckRecord, Report, TargetRow, Verdict
from dfdoctor.numbers import is_whole, size_words

# Facts about dfdoctor's own machine, the same in every row: never a difference between targets.
LOCAL_FACTS = ("host", "os", "dfdoctor_python", "target", "slurm_node")
# Options given once for every row: the same words on each, whatever they resolve to there.
SAME_BY_DESIGN = ("training_python", "cwd")
STATE_RANK = {"ok": 0, "running": 0, "unknown": 1, "failed": 2}


@dataclass(frozen=True)
class Difference:
    """One check (or fact) whose value is not the same on every row: the usual value and the rows that differ."""

    what: str  # "check" or "fact"
    key: str  # a check id, or a fact's name
    usual: str  # the value most rows share ("" when no value is shared by more than one row)
    usual_count: int
    outliers: tuple[tuple[str, str], ...]  # (target, its value), in row order

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "key": self.key, "usual": self.usual, "usual_count": self.usual_count,
                "outliers": [{"target": t, "value": v} for t, v in self.outliers]}

    def sentence(self) -> str:
        """'imports.smoke: ok on 15 targets; fail on docker://c1 (missing-module: ...)'."""
        said = (lambda v: fact_words(self.key, v)[1]) if self.what == "fact" else (lambda v: v)
        key = fact_words(self.key, "")[0] if self.what == "fact" else self.key
        grouped: dict[str, list[str]] = {}
        for t, v in self.outliers:
            grouped.setdefault(said(v), []).append(t)
        rest = "; ".join(f"{v} on {', '.join(ts)}" for v, ts in grouped.items())
        if self.usual_count > 1:
            return f"{key}: {said(self.usual)} on {self.usual_count} targets; {rest}"
        return f"{key}: {rest}"


def check_value(rec: Optional[CheckRecord]) -> str:
    """How one row's check reads when rows are compared: status, cause, and the summary of a problem."""
    if rec is None:
        return "not run"
    if rec.status.value in ("ok", "skip"):
        return rec.status.value
    cause = f" [{rec.cause}]" if rec.cause else ""
    return f"{rec.status.value}{cause}: {rec.summary}"


def _fact(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


# Facts whose raw value is a size in KiB (kept so in JSON): said in a unit a person reads, under a plain name.
_SIZES_KIB = {"dev_shm_kb": "/dev/shm size"}


def fact_words(key: str, value: str) -> tuple[str, str]:
    """(name, value) of a fact as the sentences say it: `dev_shm_kb`, `12341892` -> `/dev/shm size`, `11.8 GiB`."""
    if key in _SIZES_KIB:
        return _SIZES_KIB[key], size_words(int(value)) if is_whole(value) else value
    return key, value


def differences(report: Report) -> list[Difference]:
    """The checks and facts that are not the same on every row, checks first, in the order checks ran.

    A check compares by status and cause (a problem also by its summary), so two passing rows with different
    paths in their summaries are alike; a fact compares by value, and a fact only some rows report differs too.
    """
    rows = report.targets
    if len(rows) < 2:
        return []
    by_row = {r.target: {(c.phase, c.id): c for c in report.checks_of(r.target)} for r in rows}
    keys: list[tuple[str, str]] = []
    for r in rows:
        keys.extend(k for k in by_row[r.target] if k not in keys)
    out: list[Difference] = []
    for phase, cid in keys:
        values = [(r.target, check_value(by_row[r.target].get((phase, cid)))) for r in rows]
        label = cid if phase == "pre" else f"{cid} ({phase})"
        diff = _difference("check", label, values)
        if diff:
            out.append(diff)
    facts: list[str] = []
    for r in rows:
        facts.extend(k for k in r.environment if k not in facts and k not in LOCAL_FACTS + SAME_BY_DESIGN)
    # A row that reported no fact at all (its target could not be reached) is already a difference above.
    reporting = [r for r in rows if any(k in r.environment for k in facts)]
    for key in facts:
        values = [(r.target, _fact(r.environment[key]) if key in r.environment else "not reported")
                  for r in reporting]
        diff = _difference("fact", key, values)
        if diff:
            out.append(diff)
    return out


def _difference(what: str, key: str, values: list[tuple[str, str]]) -> Optional[Difference]:
    tally = Counter(v for _, v in values)
    if len(tally) < 2:
        return None
    usual, n = tally.most_common(1)[0]
    if n < 2:
        usual, n = "", 0
    return Difference(what, key, usual, n, tuple((t, v) for t, v in values if v != usual))


def verdict_over_rows(rows: list[TargetRow]) -> Verdict:
    """One verdict for all rows: ok when every row is; else failed, led by the worst row, every bad row named."""
    bad = [r for r in rows if r.verdict.state not in ("ok", "running")]
    if not bad:
        return Verdict("ok", None, f"{len(rows)} target(s): no problem that blocks the launch on any of them.",
                       evidence=[f"{r.target}: {r.verdict.summary}" for r in rows if r.verdict.evidence])
    worst = max(bad, key=lambda r: STATE_RANK.get(r.verdict.state, 1))
    names = ", ".join(f"{r.target}" + (f" [{r.verdict.cause}]" if r.verdict.cause else "") for r in bad)
    fix = f"On {worst.target}: {worst.verdict.fix}" if worst.verdict.fix else ""
    return Verdict(worst.verdict.state if worst.verdict.state in ("failed", "unknown") else "failed",
                   worst.verdict.cause, f"{len(bad)} of {len(rows)} target(s) found a problem: {names}.", fix,
                   [f"{r.target}: {r.verdict.summary}" for r in bad])


def row_counts(report: Report, row: TargetRow) -> dict[str, int]:
    """How many of a row's checks ended in each status."""
    return dict(Counter(c.status.value for c in report.checks_of(row.target)))
