"""`dfdoctor report`: a saved result rendered again, nothing run. Loaded only when named (cli/main.py): it reads a
file and renders it, without the engine's targets, placements or checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import click
from dfdoctor.cli.options import examples, output_options, pass_opts, validate_outputs
from dfdoctor.engine import emit, exit_code, guard
from dfdoctor.model import Report
from dfdoctor.run.folder import find_run, is_run_dir
from dfdoctor.run.masks import load_prints
from dfdoctor.safefile import guard_outputs, read_user_file


def _load_saved(spec: Optional[str]) -> tuple[Path, Report, Any]:
    """A saved report (a RESULT.json, a run folder, a run id, or, none given, the latest run), the file it was
    read from, and the launch's secret fingerprints (`redact.SecretPrints`) when it lies in a run folder."""
    path = Path(spec) if spec else None
    if path is None or not path.exists():
        try:
            path = find_run(Path.cwd(), spec)
        except (LookupError, ValueError) as exc:
            raise click.UsageError(str(exc)) from None
    if path.is_dir():
        path = path / "report.json"
    data = read_user_file(path, str(path))
    try:
        doc = json.loads(data.decode("utf-8"))
        return path, Report.from_dict(doc), load_prints(path.parent)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise click.UsageError(f"{path}: not a readable dfdoctor result ({exc})") from None


@click.command("report", epilog=examples("report"))
@click.argument("source", required=False)
@output_options
@pass_opts
def report_cmd(opts: dict[str, Any]) -> int:
    """Render saved results again (RUN folder, run id or RESULT.json) without re-running anything."""
    pairs = validate_outputs(opts)
    source, report, prints = _load_saved(opts["source"])
    guard(pairs, run_folders=(source.parent,) if is_run_dir(source.parent) else ())
    guard_outputs([o for _, o in pairs if o is not None], [("the report read", source)])
    _say_when_saved(report)
    level = opts.get("fail_on") or "error"
    emit(report, pairs, verbose=opts["verbose"], quiet=opts["quiet"], fail_on_level=level, prints=prints)
    return exit_code(report, level)


def _say_when_saved(report: Report) -> None:
    """A saved verdict of a job still running is of its time: the job may have ended since (`report` read
    "RUNNING" for a run that had completed). It says so, and which command looks again."""
    v = report.verdict
    if v.state != "running":
        return
    again = f"`dfdoctor status {report.run['id']}`" if report.run.get("id") else "`dfdoctor status`"
    when = f" at {report.finished_at}" if report.finished_at else ""
    # beside the verdict, not in it: the summary is the HTML's H1, and this sentence is about the report
    report.run["as_of"] = f"This is the report saved{when}: {again} looks again."


