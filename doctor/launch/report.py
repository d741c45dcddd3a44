"""The report of a launch or status kept in its run folder: JSON to render again, HTML to open or share, both
masked. `launch`, `status` and their sbatch forms (slurm/orchestrate.py) all save it here."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Optional

from dfdoctor import __version__
from dfdoctor.engine import environment_facts, now_iso, redacted
from dfdoctor.model import CheckRecord, Report, Verdict
from dfdoctor.render import prepare, render
from dfdoctor.run.folder import RunFolder
from dfdoctor.agent.names import REPORT_HTML, REPORT_JSON
from dfdoctor.safefile import write_atomically


TIMELINE_DIGITS = 3  # one precision for every time of a timeline (milliseconds), whoever wrote the event


def timeline_event(name: str, detail: str, t: Optional[float] = None) -> dict[str, Any]:
    """One entry of a report's timeline (now, unless `t` says when)."""
    return {"t": round(t or time.time(), TIMELINE_DIGITS), "event": name, "detail": detail}


def checks_event(records: list[CheckRecord], began: float) -> dict[str, Any]:
    """The pre-launch checks' entry, placed when they began (stamped after them, they sat after their own
    work, a second or more of a launch's start) and saying how long they took."""
    return timeline_event("pre-checks", f"{len(records)} check(s) in {time.time() - began:.{TIMELINE_DIGITS}f} s",
                          began)


def placed_report(ctx: Any, mode: str, started: str, verdict: Verdict, records: list[CheckRecord],
                  timeline: list[dict], run: dict[str, Any], target: Optional[str] = None) -> Report:
    """The report of a launch or status a placement (Slurm, Ray) made: its timeline ends with the verdict.
    `target`: where the job runs, as the placement says it (`Placement.report_target`; ctx's --target if None)."""
    return Report(tool_version=__version__, target=target or str(ctx.target), command=list(ctx.command), started_at=started,
                  finished_at=now_iso(), verdict=verdict, checks=records,
                  timeline=timeline + [timeline_event("verdict", f"{verdict.state} {verdict.cause or ''}".strip())],
                  run=run, environment=environment_facts(ctx, records), mode=mode)


def prepare_page() -> None:
    """Import and compile what `save_report`'s HTML needs, in a thread, while the launch watches the job (the
    watch mostly waits); save_report renders with it, or compiles what it has not yet."""
    def work() -> None:
        try:
            prepare("html")
        except Exception:  # save_report then compiles the page itself, and says what failed
            pass

    threading.Thread(target=work, name="dfdoctor-prepare-page", daemon=True).start()


def save_report(run_dir: Path, report: Report) -> Report:
    """Keep the report in the run folder, secrets masked (those of this shell and, through the run folder's
    fingerprints, those of the launch); return the masked report. A report that cannot be written (a full disk)
    says so in its evidence: the verdict still reaches the terminal and any --output."""
    safe = redacted(report, prints=RunFolder.at(run_dir).prints)
    try:
        write_atomically(run_dir / REPORT_JSON, json.dumps(safe.to_dict(), indent=1, default=str), private=True)
        write_atomically(run_dir / REPORT_HTML, render(safe, "html"), private=True)
    except OSError as exc:
        report.verdict.evidence.append(f"the report could not be saved in {run_dir}: {exc.strerror or exc}")
        safe.verdict.evidence.append(f"the report could not be saved in {run_dir}: {exc.strerror or exc}")
    return safe
