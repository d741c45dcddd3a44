"""launch.path: read the launch line the way every shell on its way reads it, and say where it goes wrong.

Everything here is a reading of the line (and of the launcher's text), never a run of it: the check warns,
with the reading's own severity in the evidence ("the reading says: fails"), and never fails a check or
blocks a launch on its own (docs/checks.md, "static readings and observations")."""

from __future__ import annotations

from typing import Iterator

from dfdoctor.launchline.launchpath import Analysis, analyse, read_launcher
from dfdoctor.launchline.shell import join
from dfdoctor.model import STATIC, Result, fail, ok, skip, warn
from dfdoctor.registry import check


@check("launch.path", title="Launch line, hop by hop", phases=("pre",), timeout=10)
def launch_path(ctx) -> Iterator[Result]:
    """Explain `--shell-command` / `--launcher` hop by hop: which shell parses each redirect and `&`, ttys, SIGHUP."""
    if not ctx.shell_command and not ctx.launcher:
        yield skip("no --shell-command or --launcher given: nothing to analyse")
        return
    launcher_text = None
    if ctx.launcher:
        try:
            launcher_text = read_launcher(str(ctx.abspath(ctx.launcher)))
        except OSError as exc:
            yield warn(f"cannot read the launcher {ctx.launcher}: {exc.strerror or exc}", None,
                       fix="Pass the launcher script's path as it exists on this machine.")
    a = analyse(ctx.shell_command, str(ctx.launcher) if ctx.launcher else None, launcher_text,
                str(ctx.log) if ctx.log else None)
    data = _data(a)
    evidence = tuple(f"hop {h.index} ({h.where}, parsed by {h.parsed_by}, tty {'yes' if h.tty else 'no'}): "
                     f"{h.command}" for h in a.hops)
    if not a.findings:
        yield ok(f"the job ({_job(a)}) is detached and logs where you expect"
                 if a.job else "no problem found on the launch path", evidence=evidence, data=data)
        return
    for f in a.findings:
        make = fail if f.status == "fail" else warn  # a static basis makes a fail a warn (model.Result)
        yield make(f"hop {f.hop} ({a.hops[f.hop].where}): {f.summary}", f.cause, details=f.details,
                   fix=f.fix, evidence=evidence + (f"the reading says: {'fails' if f.status == 'fail' else 'may fail'}",),
                   data=data, basis=STATIC)


def _job(a: Analysis) -> str:
    """The job in words, for summaries."""
    return f"{join(a.job.argv)} in {a.job.frame.where}" if a.job else "?"


def _data(a: Analysis) -> dict:
    """Tables for the renderers: the hops, the findings, the job and the line to copy."""
    return {"hops": [h.row() for h in a.hops],
            "findings": [{"hop": f.hop, "status": f.status, "cause": f.cause, "finding": f.summary}
                         for f in a.findings],
            "job": {"command": join(a.job.argv), "where": a.job.frame.where,
                    "stdout": a.job.frame.fds[1].describe() if 1 in a.job.frame.fds else "?"} if a.job else None,
            "corrected": a.corrected}
