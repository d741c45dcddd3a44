"""The docs are tested: every transcript (a ```console block) in README.md and docs/*.md is run here and its
output must still read as the doc shows (`...` stands for any text within a line, a line of `...` alone for any
lines); every other `dfdoctor` command the docs show must still be one dfdoctor accepts (its command, options and
choices), so a line copied from the docs is never a usage error. A command that needs the user's own value says
so with a word in capitals, `YOUR_PARTITION` (parsed with any word in its place). A transcript that runs `sbatch`,
`salloc` or `srun` runs on the test cluster (`tests/infra/slurm.sh`) and is marked slow. What is run of the other
commands, substituted or not, and why not: tests/test_doc_commands.py."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import warnings
from pathlib import Path

import click
import pytest

from conftest import BIN, REPO
from dfdoctor.cli.main import main
from infra.slurm_fixtures import slurm  # noqa: F401

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```", re.M | re.S)
USERS_OWN = re.compile(r"\bYOUR_[A-Z_]+\b")
VERDICT_LINE = re.compile(r"^dfdoctor [\w-]+: ")
ON_SLURM = re.compile(r"(^|[\s;&|(])(sbatch|salloc|srun)\s")


def _blocks(lang: str | None = None):
    for doc in DOCS:
        text = doc.read_text()
        for m in _FENCE.finditer(text):
            if lang is None or m.group("lang") == lang:
                yield doc, text[:m.start()].count("\n") + 1, m.group("lang"), m.group("body")


def _transcripts():
    for doc, line, _, body in _blocks("console"):
        steps: list[tuple[str, list[str]]] = []
        for text in body.splitlines():
            if text.startswith("$ "):
                steps.append((text[2:], []))
            elif steps:
                steps[-1][1].append(text)
        on_slurm = any(ON_SLURM.search(command) for command, _ in steps)
        yield pytest.param(steps, on_slurm, id=f"{doc.name}:{line}", marks=[pytest.mark.slow] if on_slurm else [])


def matches(expected: list[str], got: list[str]) -> bool:
    """Whether `got` reads as `expected`: `...` inside a line is any text, a line of `...` any lines."""
    if not expected:
        return not got
    head = expected[0]
    if head.strip() == "...":
        return any(matches(expected[1:], got[i:]) for i in range(len(got) + 1))
    if not got:
        return False
    pattern = ".*".join(re.escape(part) for part in head.rstrip().split("..."))
    return bool(re.fullmatch(pattern, got[0].rstrip())) and matches(expected[1:], got[1:])


@pytest.mark.parametrize("steps, on_slurm", list(_transcripts()))
def test_a_transcript_in_the_docs_still_reads_as_shown(steps, on_slurm, tmp_path, request):
    if on_slurm:
        request.getfixturevalue("slurm")  # skipped, or failed under DFDOCTOR_REQUIRE_INFRA=1, without a cluster
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "100",
           "NO_COLOR": "1", "HOME": os.environ.get("HOME", str(tmp_path))}
    env.pop("FORCE_COLOR", None)
    for command, expected in steps:
        if USERS_OWN.search(command):
            continue
        # stderr into the same pipe: the lines in the order a terminal shows them (salloc's around dfdoctor's)
        res = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=300)
        got = res.stdout.splitlines()
        assert matches(expected, got), (f"$ {command}\n--- the doc shows:\n" + "\n".join(expected)
                                        + "\n--- it prints:\n" + "\n".join(got))


def _command_lines():
    for doc, line, lang, body in _blocks():
        if lang not in ("", "sh", "bash", "console", "shell"):
            continue
        joined = body.replace("\\\n", " ")
        for i, text in enumerate(joined.splitlines()):
            if lang == "console":  # a transcript: its commands only, never the output shown under them
                if not text.startswith("$ "):
                    continue
                text = text[2:]
            if VERDICT_LINE.match(text):
                continue  # output shown in a plain block (`dfdoctor launch: FAILED [crashed]`)
            if text.startswith("dfdoctor ") or text == "dfdoctor":
                yield pytest.param(text, id=f"{doc.name}:{line + 1 + i}")


def _accepted(argv: list[str]) -> None:
    """Parse argv as the dfdoctor command line does (options, choices, arity), running nothing."""
    ctx = main.make_context("dfdoctor", list(argv))
    with warnings.catch_warnings():  # click 8.2 deprecates protected_args; 8.1 needs it
        warnings.simplefilter("ignore", DeprecationWarning)
        args = [*ctx.protected_args, *ctx.args]
    if args:
        name, cmd, rest = main.resolve_command(ctx, args)
        with cmd.make_context(name, rest, parent=ctx):
            pass


@pytest.mark.parametrize("line", list(_command_lines()))
def test_a_command_in_the_docs_is_one_dfdoctor_accepts(line):
    # a YOUR_ word is a value (a host, a partition, a job id): any word parses as it does
    argv = shlex.split(USERS_OWN.sub("x1", line), comments=True)
    assert argv[0] == "dfdoctor"
    try:
        _accepted(argv[1:])
    except click.exceptions.Exit:
        pass  # --help, -V
    except click.UsageError as exc:
        pytest.fail(f"`{line}`: {exc.format_message()}")


def test_the_docs_have_transcripts_and_commands():
    assert len(list(_transcripts())) >= 1 and len(list(_command_lines())) >= 15


def test_completion_documented_for_bash_zsh_and_fish_works():
    readme = (REPO / "README.md").read_text()
    for shell in ("bash", "zsh", "fish"):
        assert f"_DFDOCTOR_COMPLETE={shell}_source dfdoctor" in readme
        script = subprocess.run([str(BIN / "dfdoctor")], env={**os.environ, "_DFDOCTOR_COMPLETE": f"{shell}_source"},
                                capture_output=True, text=True, timeout=60)
        assert script.returncode == 0 and "_dfdoctor_completion" in script.stdout, shell
    words = subprocess.run([str(BIN / "dfdoctor")], env={**os.environ, "_DFDOCTOR_COMPLETE": "bash_complete",
                                                         "COMP_WORDS": "dfdoctor st", "COMP_CWORD": "1"},
                           capture_output=True, text=True, timeout=60)
    assert "status" in words.stdout


def test_the_matcher_tells_a_changed_output_apart():
    shown = ["dfdoctor check: FAILED [...]", "  fix: .../python3 -m pip install a b", "...", "7 skipped: -v says why"]
    assert matches(shown, ["dfdoctor check: FAILED [x]", "  fix: /v/python3 -m pip install a b", "r1", "r2",
                           "7 skipped: -v says why"])
    assert matches(shown, ["dfdoctor check: FAILED [x]", "  fix: /v/python3 -m pip install a b",
                           "7 skipped: -v says why"])
    assert not matches(shown, ["dfdoctor check: FAILED [x]", "  fix: /v/python3 -m pip install a",
                               "7 skipped: -v says why"])
    assert not matches(shown, ["dfdoctor check: OK", "  fix: /v/python3 -m pip install a b", "7 skipped: -v says why"])
    assert not matches(shown, ["dfdoctor check: FAILED [x]", "  fix: /v/python3 -m pip install a b", "extra"])
