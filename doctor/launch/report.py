"""The report of a launch or status kept in its run folder: JSON to render again, HTML to open or share, both
masked. `launch`, `status` and their sbatch forms (slurm/orchestrate.py) all save it here."""

from __future__ import annotations

import json
from pathlib import Path

from dfdoctor.engine import redacted
from dfdoctor.model import Report
from dfdoctor.render import render
from dfdoctor.run.folder import RunFolder
from dfdoctor.agent.names import REPORT_HTML, REPORT_JSON
from dfdoctor.safefile import write_atomically


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
