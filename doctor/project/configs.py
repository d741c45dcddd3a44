"""A hydra/omegaconf project's yaml config tree, read as text: the keys each file sets (dotted, with file and
line), the options of each config group (`configs/trainer/*.yaml`), and where a group's option is chosen (the
defaults list of the primary config). Read without a yaml library (dfdoctor does not need one) and without running
the job: indentation gives the nesting, which is all a closest-key answer needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from dfdoctor.lazy_re import compile_later

_KEY = compile_later(r"^( *)([A-Za-z_][\w-]*)\s*:(?:\s|$)")
_CONFIG_PATH = compile_later(r"config_path\s*=\s*(?:[\"']([^\"']+)[\"']|root\s*/\s*[\"']([^\"']+)[\"'])")
_MAX_FILES = 300


@dataclass(frozen=True)
class Key:
    """One key a config file sets: `data.batch_size` at configs/data/tiny.yaml:2."""

    name: str
    file: Path
    line: int

    def where(self, base: Path) -> str:
        try:
            return f"{self.file.relative_to(base)}:{self.line}"
        except ValueError:
            return f"{self.file}:{self.line}"


def config_dir(script: Optional[Path], root: Path) -> Optional[Path]:
    """The folder `@hydra.main(config_path=...)` names (relative to the script), else the root's configs/ or conf/."""
    if script is not None:
        try:
            m = _CONFIG_PATH.search(script.read_text(errors="replace"))
        except OSError:
            m = None
        if m:
            folder = (script.parent / m.group(1)) if m.group(1) else (root / m.group(2))
            if folder.resolve().is_dir():
                return folder.resolve()
    return next((root / n for n in ("configs", "config", "conf") if (root / n).is_dir()), None)


def keys(folder: Path) -> list[Key]:
    """Every key of the tree: a primary config's keys as they are, a group file's under its group's name."""
    out: list[Key] = []
    for f in sorted(folder.rglob("*.yaml"))[:_MAX_FILES]:
        group = ".".join(f.relative_to(folder).parent.parts)
        out += [Key(f"{group}.{k}" if group else k, f, n) for k, n in file_keys(f)]
    return out


def file_keys(path: Path) -> list[tuple[str, int]]:
    """(dotted key, line) of every mapping key in one yaml file, nesting read from the indentation."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    out, stack = [], []  # stack: (indent, key)
    for n, text in enumerate(lines, 1):
        m = _KEY.match(text)
        if not m or m.group(2) == "defaults":
            continue
        indent = len(m.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group(2)))
        out.append((".".join(k for _, k in stack), n))
    return out


def group_options(folder: Path, group: str) -> list[str]:
    """The options of a config group: the yaml files in its folder, without their suffix."""
    d = folder / group
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def chosen_at(folder: Path, group: str, option: str) -> Optional[str]:
    """`configs/train.yaml:3` where a primary config's defaults list chooses `group: option`."""
    rx = re.compile(rf"^\s*-\s*(?:override\s+)?{re.escape(group)}\s*:\s*{re.escape(option)}\s*$")
    for f in sorted(folder.glob("*.yaml")):
        try:
            for n, text in enumerate(f.read_text(errors="replace").splitlines(), 1):
                if rx.match(text):
                    return f"{f.relative_to(folder.parent)}:{n}"
        except OSError:
            continue
    return None
