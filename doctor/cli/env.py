"""`dfdoctor env`: the facts a bug report needs, as one text block to paste (as torch's `collect_env` gives):
dfdoctor's version and Python, the training interpreter and where it was found, the target, and torch's view of
CUDA, the GPUs and the driver, gathered in a subprocess of the training interpreter (never in dfdoctor's own
process: dfdoctor works where torch is broken, and says so here)."""

from __future__ import annotations

import platform
import sys
from typing import Any

import click
from dfdoctor import __version__
from dfdoctor.cli.options import examples, pass_opts
from dfdoctor.engine import build_context, target_connection
from dfdoctor.probe import run_probe
from dfdoctor.redact import Redactor
from dfdoctor.render.text import visible
from dfdoctor.render.undecodable import shown

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}
PROBE_TIMEOUT_S = 90.0  # importing torch from a cold disk or network file system can take a minute


def facts_block(facts: dict[str, Any], *, python: str, how: str, target: str, sources: list[str] = ()) -> str:
    """The text block, one `name: value` line each, in the order a reader of a bug report looks."""
    def shown(v: Any) -> str:
        return "none" if v in (None, "", []) else str(v)
    torch = shown(facts.get("torch")) + (f" ({facts['torch_file']})" if facts.get("torch_file") else "") \
        if facts.get("torch") else f"cannot be imported: {facts.get('torch_error') or 'no answer from the probe'}"
    lines = [
        ("dfdoctor", f"{__version__} (its own Python {platform.python_version()} at {sys.executable})"),
        ("target", target),
        ("training interpreter", f"{python} ({how})" + (f" -> {facts['realpath']}"
                                                        if facts.get("realpath") not in (None, python) else "")),
        ("Python", shown(facts.get("python"))),
        ("OS", shown(facts.get("platform"))),
        ("distribution", shown(facts.get("distribution"))),
        ("CPU", shown(facts.get("cpu"))),
        ("torch", torch),
    ]
    if facts.get("torch"):
        lines += [("CUDA used to build torch", shown(facts.get("torch_cuda"))),
                  *([("ROCm used to build torch", facts["torch_hip"])] if facts.get("torch_hip") else []),
                  ("cuDNN", shown(facts.get("cudnn"))),
                  ("CUDA available", facts["cuda_error"] if facts.get("cuda_error") else
                   shown(facts.get("cuda_available"))),
                  ("GPUs", "; ".join(facts.get("gpus") or []) or "none")]
    lines += [("CUDA_VISIBLE_DEVICES", shown(facts.get("cuda_visible_devices")) if facts.get("cuda_visible_devices")
               is not None else "(not set)"),
              ("NVIDIA driver", shown(facts.get("driver")))]
    width = max(len(k) for k, _ in lines)
    text = "\n".join(f"{k + ':':<{width + 1}} {_one_line(v)}" for k, v in lines) + "\n"
    return text + libraries_block(facts, sources)


def _one_line(value: str) -> str:
    """A value on its own line, whatever it holds: CUDA_VISIBLE_DEVICES="0\\n" would break the block, an ESC
    repaint the terminal; both are written out as \\xNN, and a byte that was not UTF-8 as well."""
    return visible(shown(value)).replace("\n", "\\x0a")


def libraries_block(facts: dict[str, Any], sources: list[str]) -> str:
    """`Versions of relevant libraries:` (as collect_env's): each requirement of the job with its installed
    version or "not installed", then the usual libraries that are installed."""
    wanted = facts.get("libraries") or {}
    seen = {k: v for k, v in (facts.get("libraries_seen") or {}).items() if k not in wanted}
    if not wanted and not seen:
        return ""
    rows = [(n, v or "not installed") for n, v in wanted.items()] + list(seen.items())
    width = max(len(n) for n, _ in rows)
    head = "\nVersions of relevant libraries" + (f" (the requirements of {', '.join(sources)}, then others):"
                                                 if sources else ":")
    return head + "\n" + "".join(f"  {n:<{width}}  {v}\n" for n, v in rows)


# Shown when installed, as torch's collect_env lists them: what a training job's bug report is usually about.
USUAL_LIBRARIES = ("numpy", "torch", "triton", "torchvision", "torchaudio", "transformers", "accelerate",
                   "deepspeed", "flash-attn", "xformers", "nvidia-nccl-cu12", "nvidia-cudnn-cu12")


def requirement_names(ctx: Any) -> tuple[list[str], list[str]]:
    """The distribution names the job's requirements files name (as deps.requirements finds them), and the
    files; constraints and lines that name no distribution are left out."""
    from packaging.requirements import InvalidRequirement, Requirement

    from dfdoctor.checks.deps_requirements import collect
    try:
        reqs, _, _, sources = collect(ctx)
    except OSError:
        return [], []
    names: list[str] = []
    for r in reqs:
        try:
            name = Requirement(r.text).name
        except InvalidRequirement:
            continue
        if not r.constraint and name not in names:
            names.append(name)
    return names, sources


@click.command("env", context_settings={**CONTEXT, "allow_interspersed_args": False}, epilog=examples("env"))
@click.option("--python", "python", help="The training interpreter (default: the one COMMAND names, else python3).")
@click.option("--target", default="local", show_default=True, help="Where the job runs (as for check).")
@click.option("--cwd", type=click.Path(), default=None, help="The job's working directory (default: here).")
@click.option("--requirements", "requirements", multiple=True, type=click.Path(),
              help="A requirements file whose distributions' versions to list (besides requirements.txt); repeatable.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_opts
def env_cmd(opts: dict[str, Any]) -> int:
    """The environment as one text block to paste into a bug report: torch, CUDA, driver, Python, the
    distribution, the CPU, the interpreter used, the target, dfdoctor's version, and the versions of the job's
    requirements (installed or not). COMMAND (after --) picks the interpreter as check does."""
    ctx, _ = build_context(opts, list(opts["command"]))
    how = "--python" if opts.get("python") else ("named by the command" if opts["command"] else "python3 on PATH")
    names, sources = requirement_names(ctx)
    with target_connection(ctx):
        outcome = run_probe(ctx, "env_probe.py", timeout=PROBE_TIMEOUT_S,
                            request={"requirements": names, "usual": list(USUAL_LIBRARIES)})
    facts = dict(outcome.payload or {})
    if outcome.timed_out:
        facts["torch_error"] = f"importing torch did not finish within {PROBE_TIMEOUT_S:g} s"
    elif not outcome.payload:
        facts["torch_error"] = (outcome.spawn_error or outcome.stderr.strip()[-300:]
                                or f"the probe gave no answer (exit {outcome.returncode})")
    text = facts_block(facts, python=ctx.python or "python3", how=how, target=str(ctx.target), sources=sources)
    click.echo(Redactor.from_env(dict(ctx.env or {})).text(text), nl=False)
    return 0
