"""The commands README.md and docs/*.md show, read out of their code blocks, and how the tests put the test
infrastructure's values in place of the user's own (`YOUR_PARTITION`, `YOUR_HOST`, ...).

A block with `$ ` lines is a transcript: its `$ ` lines are commands (a line ending in `\\` goes on), the rest is
output. In any other shell block every line is a command (`# ...` comments and blank lines aside). In a YAML
block (docs/ci.md) the commands are a step's `run:` and a GitLab job's `script:` items."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```", re.M | re.S)
SHELL_LANGS = ("", "sh", "bash", "console", "shell")
_COMMENT = re.compile(r"\s+#\s.*$")  # a trailing `   # what it does` (no doc command has ` # ` inside quotes)
USERS_OWN = re.compile(r"\bYOUR_[A-Z0-9_]+\b")


@dataclass(frozen=True)
class DocCommand:
    doc: str  # README.md, docs/slurm.md
    line: int  # where the command starts in the doc
    text: str  # as the doc shows it, continuation lines joined, the trailing comment left off
    output: tuple[str, ...]  # for a transcript's command: the lines shown under it
    transcript: bool  # a `$ ` line of a transcript
    compared: bool = False  # in a ```console block, whose output tests/test_docs.py compares

    @property
    def key(self) -> str:
        """What the overview (tests/test_doc_commands.py COVERAGE) names it by: doc and command, spaces squeezed."""
        return f"{self.doc}: {' '.join(self.text.split())}"


def blocks():
    """(doc, line of the fence, lang, body) of every fenced block."""
    for doc in DOCS:
        text = doc.read_text()
        for m in _FENCE.finditer(text):
            yield doc, text[:m.start()].count("\n") + 1, m.group("lang"), m.group("body")


def _joined(lines: list[str], i: int) -> tuple[str, int]:
    """The command starting at lines[i], with its `\\` continuation lines; and the index after it."""
    parts = [lines[i]]
    while parts[-1].rstrip().endswith("\\") and i + 1 < len(lines):
        parts[-1] = parts[-1].rstrip()[:-1].rstrip()
        i += 1
        parts.append(lines[i].strip())
    return " ".join(parts), i + 1


def _from_shell(name: str, fence: int, lang: str, body: str):
    lines = body.splitlines()
    transcript = lang == "console" or any(x.startswith("$ ") for x in lines)
    i = 0
    while i < len(lines):
        if transcript and not lines[i].startswith("$ "):
            i += 1
            continue
        start = i
        raw = lines[i][2:] if transcript else lines[i]
        command, i = _joined([raw, *lines[start + 1:]], 0)
        i = start + i
        if not command.strip() or command.lstrip().startswith("#"):
            continue
        output: list[str] = []
        if transcript:
            while i < len(lines) and not lines[i].startswith("$ "):
                output.append(lines[i])
                i += 1
        yield DocCommand(name, fence + 1 + start, _COMMENT.sub("", command).strip(), tuple(output), transcript,
                         lang == "console")


def _from_yaml(name: str, fence: int, body: str):
    lines = body.splitlines()
    for i, text in enumerate(lines):
        m = re.match(r"^(\s*)(?:- )?run: (.*)$", text) or re.match(r"^(\s*)- (?!\w+:)(.*)$", text)
        if not m:
            continue
        command, indent = m.group(2), len(m.group(1))
        for more in lines[i + 1:]:  # a GitLab script item goes on over more-indented lines
            if len(more) - len(more.lstrip()) <= indent + 2 or not more.strip():
                break
            command += " " + more.strip()
        yield DocCommand(name, fence + 1 + i, _COMMENT.sub("", command).strip(), (), False)


def commands() -> list[DocCommand]:
    """Every command shown in README.md and docs/*.md, in reading order."""
    found: list[DocCommand] = []
    for doc, fence, lang, body in blocks():
        name = str(doc.relative_to(REPO))
        if lang in SHELL_LANGS:
            found.extend(_from_shell(name, fence, lang, body))
        elif lang == "yaml":
            found.extend(_from_yaml(name, fence, body))
    return found


if __name__ == "__main__":
    for c in commands():
        print(f"{c.doc}:{c.line}  {'$ ' if c.transcript else ''}{c.text}")
