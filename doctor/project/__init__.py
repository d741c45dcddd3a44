"""A model of the user's project, the language every fix is written in: the entry script and the options its
parser takes, the run and install lines of its README, how it installs and which distribution provides an import,
and the paths its code reads and writes with the option that sets each.

Everything here is read from the project's files (ast, text), never by importing or running them: dfdoctor's own
process must not run user code, and the same reading serves before a launch (checks) and after it (verdicts).
`options.py` says why the options are read statically rather than from `--help`.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from dfdoctor.launchline import commandline
from dfdoctor.project.install import Install, read_install
from dfdoctor.project.options import Option, Options, read_options
from dfdoctor.project.paths import PathUse, path_uses
from dfdoctor.project.readme import ReadmeLine, readme_lines, runs_of
from dfdoctor.project.source import Module, local_imports

_UP = 4  # how many folders above the script a project's root (its setup.py, README, .git) is looked for


@dataclass(frozen=True)
class Project:
    """What dfdoctor knows of the job's project."""

    cwd: Path
    root: Path
    script: Optional[Path] = None
    args: tuple[str, ...] = ()  # the arguments the command gives the script
    options: Options = field(default_factory=Options)
    readme: tuple[ReadmeLine, ...] = ()
    install: Optional[Install] = None
    paths: tuple[PathUse, ...] = ()
    files: tuple[Module, ...] = ()  # the script and the project's modules it imports

    def option(self, name: str) -> Optional[Option]:
        """The script's option `name` (dest or flag), or None."""
        return self.options.find(name)

    def given(self, option: Option) -> Optional[str]:
        """The value the command gives `option`, if it does (`--device=cpu`, `--device cpu`, `-i x`)."""
        args = list(self.args)
        for i, a in enumerate(args):
            for f in option.flags:
                if a == f and i + 1 < len(args):
                    return args[i + 1]
            value = _attached(a, option) if self._not_another(a, option) else None
            if value is not None:
                return value
        if self.options.kind == "configurator":  # nanoGPT's config files on the command set the same globals
            for a in reversed(args):
                if a.endswith(".py") and not a.startswith("--"):
                    value = _config_value(self.cwd / a, option.dest)
                    if value is not None:
                        return value
        return None

    def words_of(self, option: Option) -> list[str]:
        """The words of the command that give `option` (`--gpu 0`, `--cuda`, `--device=cuda`), empty if none."""
        args = list(self.args)
        for i, a in enumerate(args):
            for f in option.flags:
                if a == f:
                    return [a] if option.switch or i + 1 >= len(args) else [a, args[i + 1]]
                if a.startswith(f + "=") or (f in option.shorts and a.startswith(f) and not option.switch
                                             and self._not_another(a, option)):
                    return [a]  # `-inames.txt`: argparse and click read what follows a one-letter flag as its value
        return []

    def _not_another(self, word: str, option: Option) -> bool:
        """`word` is no flag of another option (`-lr` declared beside `-l` is its own, not `-l r`)."""
        name = word.split("=", 1)[0]
        return not any(name in o.flags for o in self.options.options if o is not option)

    def typed_flag(self, option: Option) -> str:
        """The spelling of `option` the command uses (`-i` where it gives `-i names.txt`), else its long one: a
        finding about it quotes the user's own words."""
        words = self.words_of(option)
        if words:
            word = words[0].split("=", 1)[0]
            return next((f for f in option.flags if word == f), next((f for f in option.shorts
                                                                      if word.startswith(f)), option.flag))
        return option.flag

    def option_for_path(self, missing: str) -> Optional[Option]:
        """The option that sets `missing` (absolute, or relative to the job's folder): the one whose given value
        or default is the path or a folder above it, else the one the code joins into a path of that name."""
        full = os.path.normpath(missing if os.path.isabs(missing) else os.path.join(self.cwd, missing))
        best = None
        for o in self.options.options:
            for value in (self.given(o), o.default):
                if isinstance(value, str) and value.strip():
                    v = os.path.normpath(value if os.path.isabs(value) else os.path.join(self.cwd, value))
                    if full == v or full.startswith(v.rstrip(os.sep) + os.sep):
                        if best is None or len(v) > best[0]:
                            best = (len(v), o)
        if best:
            return best[1]
        use = self.joined_into(missing)
        return self.options.find(use.dest) if use else None

    def option_inside(self, folder: str) -> Optional[Option]:
        """The option whose value (given, else its default) is a path inside `folder` (`--save checkpoints/m.pt`
        for a missing `checkpoints`): a missing output folder named by the folder alone, not the file."""
        top = os.path.normpath(folder if os.path.isabs(folder) else os.path.join(self.cwd, folder))
        for o in self.options.options:
            value = self.given(o) if self.given(o) is not None else o.default
            if isinstance(value, str) and value.strip():
                v = os.path.normpath(value if os.path.isabs(value) else os.path.join(self.cwd, value))
                if v.startswith(top.rstrip(os.sep) + os.sep):
                    return o
        return None

    def joined_into(self, missing: str) -> Optional[PathUse]:
        """Where the code builds a path of this name from an option (`os.path.join(data_dir, 'train.bin')` with
        data_dir from `--dataset`): the option is then a part of the path, not the path."""
        name = os.path.basename(missing)
        for use in self.paths:
            if use.dest and use.hint and os.path.basename(use.hint) == name and self.options.find(use.dest):
                return use
        return None

    def runs(self, script: Optional[Path] = None) -> list[ReadmeLine]:
        """The README lines that run `script` (default: the job's own)."""
        s = script or self.script
        return runs_of(list(self.readme), str(s)) if s else []

    def short(self, path: Path | str) -> str:
        """A path relative to the job's folder when inside it, else to the project's root, else as it is."""
        p = Path(path)
        for base in (self.cwd, self.root):
            try:
                return str(p.relative_to(base))
            except ValueError:
                continue
        return str(p)


def read(argv: Sequence[str], cwd: str | Path, script: Optional[str] = None) -> Project:
    """The project of a job run as `argv` in `cwd` (its script from the command, or `script` when given)."""
    cwd = Path(cwd or ".").resolve()
    args: tuple[str, ...] = ()
    path: Optional[Path] = None
    if script:
        path = Path(script) if os.path.isabs(script) else cwd / script
    else:
        try:
            spec = commandline.parse(list(argv), cwd, env={"PATH": os.environ.get("PATH", "")})
        except Exception:  # noqa: BLE001 - a command dfdoctor cannot read gives a project without a script
            spec = None
        if spec is not None and spec.script is not None:
            path = Path(spec.script) if spec.script.is_absolute() else cwd / spec.script
            args = tuple(spec.script_args)
    if path is None or not path.is_file():
        return Project(cwd=cwd, root=cwd)
    path = path.resolve()
    root = _root(path.parent, cwd)
    folders = _folders(path.parent, root)
    main = _module(path, cwd, root)
    local = [_module(p, cwd, root) for p in local_imports(main, [path.parent, cwd, root])]
    for m in list(local):  # one level further: a package's modules importing each other (mingpt.trainer -> utils)
        local += [_module(p, cwd, root) for p in local_imports(m, [path.parent, cwd, root])
                  if p != path and all(p != x.path for x in local)]
    readme = readme_lines(folders, root)
    install = read_install(root, folders, [r for r in readme if _is_install(r)])
    uses = tuple(u for m in (main, *local) for u in path_uses(m))
    return Project(cwd, root, path, args, read_options(main, local), tuple(readme), install, uses,
                   (main, *local))


def _attached(word: str, option: Option) -> Optional[str]:
    """The value written in one word with its flag: `--device=cpu`, `-i=names.txt`, `-inames.txt`; None for a
    flag alone (a switch, or a value-taking flag at the end of the command)."""
    for f in option.flags:
        if word.startswith(f + "="):
            return word.split("=", 1)[1]
    short = next((f for f in option.shorts if word.startswith(f) and len(word) > len(f)), None)
    return word[len(short):] if short and not option.switch else None


def _config_value(path: Path, name: str) -> Optional[str]:
    """The literal a configurator's config file assigns to `name` (`dataset = 'shakespeare_char'`), as text."""
    tree = Module.read(path, path.parent).tree
    for node in tree.body if tree is not None else ():
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets) \
                and isinstance(node.value, ast.Constant):
            return str(node.value.value)
    return None


def _module(path: Path, cwd: Path, root: Path) -> Module:
    """A source file, named relative to the job's folder when inside it, else by its full path (a path relative to
    another folder than the one the user is in is read wrongly)."""
    return Module.read(path, cwd if path.is_relative_to(cwd) else Path("/"))


def _is_install(r: ReadmeLine) -> bool:
    w = r.words
    return "install" in w[:4] and bool(w) and (w[0] in ("pip", "pip3", "conda", "uv") or w[1:3] == ["-m", "pip"])


def _root(folder: Path, cwd: Path) -> Path:
    """The project's root: the nearest folder up from the script with packaging or .git, else the script's own."""
    p = folder
    for _ in range(_UP + 1):
        if any((p / m).exists() for m in ("setup.py", "pyproject.toml", "setup.cfg", ".git", ".project-root")):
            return p
        if p.parent == p:
            break
        p = p.parent
    return folder


def _folders(start: Path, root: Path) -> list[Path]:
    """The script's folder and each one above it up to the root."""
    out = [start]
    p = start
    while p != root and p.parent != p and len(out) <= _UP:
        p = p.parent
        out.append(p)
    return out
