"""How a project installs, and which distribution provides an import, where that can be known.

Known: the project's own packages (a `mingpt/` folder beside its setup.py is installed with `pip install -e .` in
its checkout, not from the index, where `mingpt` may be nobody's or a stranger's), a requirements file that names
the import's distribution, and the import names whose distribution is called otherwise (PIP_NAMES, kept with the
checks). Anything else is a guess, and a fix says so and names the project's own install lines instead.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from dfdoctor.project.readme import ReadmeLine
from dfdoctor.safefile import read_head_text
from dfdoctor.lazy_re import compile_later

# Import names whose distribution is called something else (the usual surprises).
PIP_NAMES = {"cv2": "opencv-python", "PIL": "Pillow", "yaml": "PyYAML", "sklearn": "scikit-learn",
             "skimage": "scikit-image", "bs4": "beautifulsoup4", "attr": "attrs", "dateutil": "python-dateutil",
             "google.protobuf": "protobuf", "jwt": "PyJWT", "Crypto": "pycryptodome", "dotenv": "python-dotenv",
             "serial": "pyserial", "git": "GitPython", "fitz": "PyMuPDF", "magic": "python-magic",
             "flash_attn": "flash-attn", "apex": "apex (built from source)", "wandb": "wandb"}
_MARKERS = ("setup.py", "pyproject.toml", "setup.cfg")
_REQ = compile_later(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_TAKES_VALUE = ("-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url",
                "--extra-index-url", "-f", "--find-links", "--target", "-t", "--prefix")


@dataclass(frozen=True)
class Install:
    """What installs the project: its packaging file, its own top-level packages, its requirements files."""

    root: Path
    packaging: Optional[str] = None  # 'setup.py' | 'pyproject.toml' | 'setup.cfg', relative to root
    packages: tuple[str, ...] = ()  # its own import names
    requirements: tuple[tuple[str, int, str], ...] = ()  # (file, line, requirement)
    readme: tuple[ReadmeLine, ...] = field(default_factory=tuple)  # the README's install lines

    def own_line(self, python: str) -> str:
        """The line that installs the project itself, as its README writes it when it does."""
        for r in self.readme:
            if "-e" in r.words or "--editable" in r.words:
                rest = " ".join(shlex.quote(w) for w in r.words[r.words.index("install") + 1:])
                return f"cd {shlex.quote(str(self.root))} && {shlex.quote(python)} -m pip install {rest}   " \
                       f"(as {r.where} does)"
        return f"{shlex.quote(python)} -m pip install -e {shlex.quote(str(self.root))}"

    def declares(self, module: str) -> Optional[str]:
        """Where the project names the distribution of a top-level import (`requirements.txt:3`, `README.md:12`,
        `pyproject.toml`), or None: only a declared name may be installed from the index by its own name, since
        an undeclared one close to an installed module is a typo, and on the index it may be a stranger's."""
        top = module.split(".")[0]
        wanted = {canonical(top), canonical(_known_dist(top) or top)}
        for file, line, req in self.requirements:
            name = _REQ.match(req)
            if name and canonical(name.group(1)) in wanted:
                return f"{file}:{line}"
        for r in self.readme:
            if any(m and canonical(m.group(1)) in wanted for m in map(_REQ.match, r.words[1:])):
                return r.where
        if self.packaging == "pyproject.toml" and wanted & _pyproject_dependencies(self.root / self.packaging):
            return "pyproject.toml"
        return None

    def declared(self) -> list[tuple[str, str, Optional[str]]]:
        """(distribution, where, extra) for every requirement the project names: its requirements files, its
        README's install lines, its pyproject.toml's dependencies (`extra`: the optional-dependencies group)."""
        out = [(m.group(1), f"{file}:{line}", None) for file, line, req in self.requirements
               if (m := _REQ.match(req))]
        for r in self.readme:
            out += [(name, r.where, None) for name in _readme_names(r.words)]
        if self.packaging == "pyproject.toml":
            out += _pyproject_lines(self.root / self.packaging)
        return out

    def line_for(self, where: str, python: str, extra: Optional[str] = None) -> tuple[str, str]:
        """(command, whose) for the project's own line that installs what it declares at `where` (a requirements
        file, a README install line, its pyproject.toml), into `python`."""
        file = where.rsplit(":", 1)[0]
        for r in self.readme:
            if r.where == where:
                w = r.words
                if w[0] in ("pip", "pip3") or w[1:3] == ["-m", "pip"]:  # pip of the job's interpreter, not PATH's
                    rest = " ".join(shlex.quote(x) for x in w[w.index("install") + 1:])
                    return f"cd {shlex.quote(str(self.root))} && {shlex.quote(python)} -m pip install {rest}", \
                        f"as {where} does"
                return f"cd {shlex.quote(str(self.root))} && {r.text}", f"{where}'s line"
        if file.endswith(".txt"):
            return f"{shlex.quote(python)} -m pip install -r {shlex.quote(str(self.root / file))}", f"its {file}"
        target = str(self.root) + (f"[{extra}]" if extra else "")
        return f"{shlex.quote(python)} -m pip install -e {shlex.quote(target)}", f"its {file}"

    def provider(self, module: str) -> tuple[Optional[str], str]:
        """(requirement or install line, how it is known) for a top-level import name; (None, why) when unknown."""
        top = module.split(".")[0]
        if top in self.packages:
            return "-e", f"{top} is this project's own package ({self.packaging or 'its folder'} in {self.root})"
        for file, line, req in self.requirements:
            name = _REQ.match(req)
            if name and canonical(name.group(1)) in (canonical(top), canonical(_known_dist(top) or "")):
                return req, f"{file}:{line} names it"
        dist = _known_dist(module) or _known_dist(top)
        if dist:
            return dist, f"the import {top!r} comes from the distribution {dist}"
        return None, (f"which distribution provides {top!r} is not known here (an import name is not always a "
                      "name on the package index)")


def import_names(dist: str) -> set[str]:
    """The import names a declared distribution is known by: the known one where the distribution is called
    otherwise (`scikit-learn`: `sklearn`), else its own name and its normalised form (`flash-attn`: `flash_attn`)."""
    known = {k.split(".")[0] for k, v in PIP_NAMES.items() if canonical(v) == canonical(dist)}
    return known or {dist, canonical(dist).replace("-", "_")}


def _readme_names(words: list[str]) -> list[str]:
    """The distributions a README install line names (`pip install torch torchvision`): not its options, the
    values they take, local paths or URLs."""
    if "install" not in words:
        return []
    out, skip = [], False
    for w in words[words.index("install") + 1:]:
        if skip or w.startswith("-"):
            skip = w in _TAKES_VALUE
            continue
        m = _REQ.match(w)
        if m and "/" not in w and ":" not in w:
            out.append(m.group(1))
    return out


def _known_dist(module: str) -> Optional[str]:
    return PIP_NAMES.get(module)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_install(root: Path, folders: list[Path], readme: list[ReadmeLine]) -> Install:
    """The packaging of `root` and the requirements files of `folders` (the script's folder up to the root)."""
    packaging = next((m for m in _MARKERS if (root / m).is_file()), None)
    packages: list[str] = []
    if packaging:
        text = _read(root / packaging)
        listed = re.search(r"packages\s*=\s*\[([^\]]*)\]", text)
        if listed:
            packages = [p.split(".")[0] for p in re.findall(r"""['"]([\w.]+)['"]""", listed.group(1))]
        if not packages:  # find_packages() or automatic discovery: the folders with an __init__.py
            packages = sorted(p.parent.name for p in root.glob("*/__init__.py") if p.parent.name not in ("tests",))
            packages += [p.parent.name for p in root.glob("src/*/__init__.py")]
    reqs = []
    for folder in folders:
        for name in ("requirements.txt", "requirements-dev.txt"):
            path = folder / name
            if path.is_file():
                for n, line in enumerate(_read(path).splitlines(), 1):
                    line = line.split("#", 1)[0].strip()
                    if line and not line.startswith("-"):
                        reqs.append((str(path.relative_to(root)) if path.is_relative_to(root) else str(path), n,
                                     line))
    return Install(root, packaging, tuple(dict.fromkeys(packages)), tuple(reqs), tuple(readme))


def _pyproject_dependencies(path: Path) -> set[str]:
    """The canonical names in a pyproject.toml's dependency lists (project.dependencies, optional ones)."""
    try:
        import tomllib
        data = tomllib.loads(_read(path))
    except (ImportError, ValueError):
        return set()
    proj = data.get("project") if isinstance(data.get("project"), dict) else {}
    reqs = list(proj.get("dependencies") or [])
    for extra in (proj.get("optional-dependencies") or {}).values():
        reqs += list(extra or [])
    return {canonical(m.group(1)) for m in (_REQ.match(str(r)) for r in reqs) if m}


def _pyproject_lines(path: Path) -> list[tuple[str, str, Optional[str]]]:
    """(distribution, `pyproject.toml:LINE`, extra) for its dependency lists; the line is the first that quotes
    the requirement (the file itself where none does)."""
    try:
        import tomllib
        text = _read(path)
        data = tomllib.loads(text)
    except (ImportError, ValueError):
        return []
    proj = data.get("project") if isinstance(data.get("project"), dict) else {}
    groups = [(None, proj.get("dependencies") or [])]
    groups += [(extra, reqs or []) for extra, reqs in (proj.get("optional-dependencies") or {}).items()]
    lines = text.splitlines()
    out = []
    for extra, reqs in groups:
        for req in map(str, reqs):
            m = _REQ.match(req)
            if m:
                n = next((i for i, t in enumerate(lines, 1) if f'"{req}"' in t or f"'{req}'" in t), None)
                out.append((m.group(1), f"{path.name}:{n}" if n else path.name, extra))
    return out


def _read(path: Path) -> str:
    return read_head_text(path, 1 << 20) or ""  # never the whole of a file of unknown size
