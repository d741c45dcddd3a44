"""deps.requirements: are the job's packages installed, in versions that fit, in the training interpreter?

It reads the requirements (`requirements.txt` and the `[project] dependencies` of `pyproject.toml` in the
job's folder, plus every `--requirements FILE`), then asks the training interpreter itself, through
`importlib.metadata`, what is installed: markers (`; python_version < "3.12"`, `; platform_machine ==
"x86_64"`) are evaluated there, not in dfdoctor's Python. It also does what `pip check` does, offline: every
installed distribution's own pins (torch's triton, nvidia-* and sympy pins included) against what is
installed, failing for those the job depends on and warning for the rest.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

import packaging
from dfdoctor import OBSERVED, STATIC, Result, causes, check, error, fail, ok, skip, warn
from dfdoctor.launchline.commandline import as_lead, guessed_interpreter, spec_for
from dfdoctor.probe import unreached
from dfdoctor.safefile import read_head
from dfdoctor.diagnose import torch_pairs
from dfdoctor.checks import deps_answer, target_files
from dfdoctor.checks.target_files import HERE, Files
from dfdoctor.checks.deps_imports import JobImports, read_job_imports
from dfdoctor.project.readme import ReadmeLine
from dfdoctor.lazy_re import compile_later

MAX_INCLUDE_DEPTH = 8
MAX_SHOWN = 10
SCRIPT_LIMIT = 1 << 20  # a script larger than this is not read for its imports (nor held whole in memory)
# Always followed, requirements file or not: the job is a training job, and torch's pins are where
# environments break (a triton, nvidia-* or sympy that pip let drift).
FOCUS = ("torch",)
PACKAGING_DIR = os.path.dirname(packaging.__file__)


@dataclass(frozen=True)
class Requirement:
    """One requirement line and where it came from (`requirements.txt:3`)."""

    text: str
    source: str
    constraint: bool = False


@dataclass(frozen=True)
class Skipped:
    """A line that names no installable requirement we can check (an editable install, a local path, ...)."""

    text: str
    source: str
    why: str


@check("deps.requirements", title="Required packages are installed in the training interpreter",
       phases=("pre",), timeout=30, gates=False)  # its causes (dependency-*) never stop a launch
def deps_requirements(ctx) -> Iterator[Result]:
    """Check the requirements and the installed distributions' own pins inside the training interpreter."""
    spec = spec_for(ctx)
    remote = not ctx.target.runs_here
    if not remote and (ctx.command or ctx.launcher) and not spec.exists and spec.python is None and \
            spec.runner in ("python", "torchrun", "accelerate"):
        yield skip(f"the interpreter the command names cannot be found ({spec.problem}); imports.smoke reports it, "
                   "and checking another interpreter's packages would mislead")
        return
    reading = None if remote else read_job_imports(spec.script, ctx.cwd)
    (_, skipped, problems, sources), (out, read_at) = _asked(ctx, spec, reading)
    for p in problems:
        yield p
    unreachable = unreached(ctx, out)
    if unreachable:
        yield unreachable
        return
    if out.spawn_error:
        yield skip(f"the training interpreter {ctx.python} cannot be started ({out.spawn_error}); "
                   "imports.smoke reports that")
        return
    p = out.payload
    if out.timed_out or p is None:
        yield error(f"the dependency probe gave no answer in {ctx.python} "
                    + ("(timed out)" if out.timed_out else f"(exit status {out.returncode})"),
                    details="\n".join(out.stderr.splitlines()[-30:]),
                    fix="dfdoctor's probes need Python 3 in the training interpreter (3.8+ for this check).")
        return
    if p.get("error"):
        yield skip(f"cannot evaluate requirements in {ctx.python}: {p['error']}",
                   fix=f"{shlex.quote(ctx.python)} -m pip install packaging")
        return
    if read_at is not None:
        p = {**p, "read_at": read_at}
    yield from as_lead(conclude(ctx, p, skipped, sources, reading), guessed_interpreter(ctx, spec))


def _asked(ctx, spec, reading: Optional[JobImports]):
    """The requirements (`collect`) and the probe's outcome for them, with when it was observed if reused.

    On a --target the requirement files are read there in the probe's own round trip (its `read`): it is asked
    first for the requirements known before they are read (this machine's --requirements files), and its answer
    stands where the files it read add none (no requirements.txt there, a pyproject.toml without dependencies);
    else it is asked again for the whole list. The answer kept is always the one for the very list reported."""
    timeout = max(2.0, float(ctx.timeout or 30) - 1.0)
    if ctx.target.runs_here:
        got = collect(ctx)
        return got, deps_answer.ask(ctx, _request(ctx, got[0], spec, reading), timeout)
    paths = _target_paths(ctx)
    before = _request(ctx, collect(ctx, target_files.Fetched())[0], spec, reading)  # as if the target had none
    first = deps_answer.ask(ctx, {**before, "read": target_files.request(paths)}, timeout)
    got = collect(ctx, target_files.fetch(ctx, paths, includes=_includes_of, depth=MAX_INCLUDE_DEPTH,
                                          first=first[0]))
    wanted = _request(ctx, got[0], spec, reading)
    return got, (first if wanted == before else deps_answer.ask(ctx, wanted, timeout))


def _request(ctx, reqs: list[Requirement], spec, reading: Optional[JobImports]) -> dict:
    """What the dependency probe is asked (deps_probe.py)."""
    return {"requirements": [{"req": r.text, "source": r.source, "constraint": r.constraint} for r in reqs],
            "packaging_dir": PACKAGING_DIR, "focus": list(FOCUS),
            "modules": script_modules(spec) if ctx.target.runs_here else [],
            "job_modules": list(reading.modules) if reading else []}


def _target_paths(ctx) -> list[Path]:
    """The requirement files read in the job's folder on a target."""
    return [ctx.cwd / "requirements.txt", ctx.cwd / "pyproject.toml"]


def conclude(ctx, p: dict, skipped: list[Skipped], sources: list[str],
             reading: Optional[JobImports] = None) -> Iterator[Result]:
    """Findings from the probe's answer: missing, mismatched, conflicting and duplicated distributions. A missing
    requirement that the job's code never imports (`reading`, deps_imports.py) warns instead of failing."""
    py = shlex.quote(ctx.python)
    data = {"python": p["executable"], "python_version": p["python"], "sources": sources,
            "requirements": p["results"], "packaging": p.get("packaging"), "installed_read_at": p.get("read_at")}
    bad = False
    shown = 0
    whole = _whole_file_fixes(ctx, p["results"], reading.install_lines if reading else ())
    missing = [r["name"] for r in p["results"] if r["status"] == "missing"]
    for r in p["results"]:
        if r["status"] in ("missing", "mismatch"):
            shown += 1
            if shown > MAX_SHOWN:
                continue
        if r["status"] == "missing" and reading is not None and \
                reading.softens(r["name"], missing, p.get("unfound") or []):
            readers = reading.files[0] + (" and the project's modules it imports never import" if reading.files[1:]
                                          else " never imports")
            yield warn(f"{r['name']} is not installed in {p['executable']} ({r['source']}: {r['req']}), but "
                       f"{readers} it (a static reading): this launch does not need it",
                       causes.DEPENDENCY_MISSING, basis=STATIC,
                       evidence=(f"{r['source']}: {r['req']}",
                                 "imports read: " + (", ".join(reading.modules) or "none") + " in "
                                 + ", ".join(reading.files)),
                       fix=whole.get(_file_of(r)) or f"{py} -m pip install {shlex.quote(_pin(r))}   (for the "
                       f"project's other scripts: {reading.files[0]} does not import it)", data=data)
        elif r["status"] == "missing":
            bad = True
            yield fail(f"{r['name']} is not installed in {p['executable']} ({r['source']}: {r['req']})",
                       causes.DEPENDENCY_MISSING, evidence=(f"{r['source']}: {r['req']}",),
                       fix=whole.get(_file_of(r)) or _paired_fix(ctx, p, r["name"])
                       or f"{py} -m pip install {shlex.quote(_pin(r))}", data=data)
        elif r["status"] == "mismatch":
            bad = True
            yield fail(f"{r['name']} {r['installed']} is installed, but {r['source']} requires {r['req']}",
                       causes.DEPENDENCY_MISMATCH,
                       evidence=(f"{r['source']}: {r['req']}", f"installed: {r['name']} {r['installed']} in {r['location']}"),
                       fix=whole.get(_file_of(r)) or f"{py} -m pip install {shlex.quote(_pin(r))}", data=data)
        elif r["status"] == "unparsable":
            yield warn(f"{r['source']}: cannot parse requirement {r['req']!r} ({(r.get('error') or '').splitlines()[0]})",
                       fix="Write it as PEP 508 (e.g. name>=1.2; python_version >= \"3.10\").", data=data)
    if shown > MAX_SHOWN:
        yield fail(f"... and {shown - MAX_SHOWN} more requirement(s) missing or mismatched",
                   causes.DEPENDENCY_MISSING, fix=next(iter(whole.values()), f"{py} -m pip install -r <your requirements file>"),
                   data=data)
    for finding in _unpaired(ctx, p, data):
        bad = bad or finding.status.value == "fail"
        yield finding
    relevant = [c for c in p["conflicts"] if c["relevant"]]
    for c in relevant[:MAX_SHOWN]:
        bad = True
        # the conflict is observed; that the job uses it is, when only the script's imports (read with ast) say
        # so, a reading: it warns then
        yield fail(_conflict_text(c), causes.DEPENDENCY_MISSING if c["problem"] == "missing" else causes.DEPENDENCY_MISMATCH,
                   basis=OBSERVED if c.get("stated", True) else STATIC,
                   evidence=(f"{c['dist']} {c['version']} requires: {c['requirement']}",),
                   fix=f"{py} -m pip install {shlex.quote(c['requirement'].split(';')[0].strip())}"
                       f"   (or reinstall {c['dist']} {c['version']} so pip picks matching versions)",
                   data=data)
    # Conflicts among distributions the job does not use (on a remote target: mostly the distribution's own
    # system packages) are no problem of the launch: said in the ok line, listed in its details, never a warning
    # whose `pip check` fix would be run on the wrong machine.
    others = [c for c in p["conflicts"] if not c["relevant"]]
    dups = p.get("duplicates") or {}
    if dups:
        ev = tuple(f"{name}: " + ", ".join(f"{d['version']} in {d['location']}" for d in entries)
                   for name, entries in list(dups.items())[:MAX_SHOWN])
        yield warn(f"{len(dups)} distribution(s) installed more than once on sys.path; the first one wins "
                   f"({', '.join(list(dups)[:5])})", causes.DEPENDENCY_MISMATCH, evidence=ev,
                   fix="Uninstall the copy you do not want (pip uninstall, or remove it from PYTHONPATH / user site).",
                   data=data)
    if bad:
        return
    n_req = sum(1 for r in p["results"] if r["status"] == "ok")
    na = [r for r in p["results"] if r["status"] == "not-applicable"]
    focus = ", ".join(f"{k} {v}" for k, v in (p.get("focus") or {}).items())
    if sources:
        summary = (f"{n_req} requirement(s) from {', '.join(sources)} satisfied in Python {p['python']}"
                   + (f" ({len(na)} not applicable here)" if na else ""))
    else:
        where = "" if ctx.target.runs_here else f" in {ctx.cwd} on the target"
        summary = (f"no requirements file found{where}; what the job depends on is installed and agrees "
                   f"({p['n_dists']} distributions checked)")
    if others:
        summary += f"; {len(others)} conflict(s) among distributions the job does not use (details list them)"
    details = [f"python {p['python']} ({p['executable']}); {p['n_dists']} distributions installed"
               + (f" ({deps_answer.age_words(p['read_at'])}; nothing on its import path has changed since)"
                  if p.get("read_at") else "")]
    details += [f"not the job's: {_conflict_text(c)}" for c in others[:MAX_SHOWN]]
    details += [f"not applicable here: {r['source']}: {r['req']}" for r in na]
    details += [f"not checked: {s.source}: {s.text} ({s.why})" for s in skipped]
    if focus:
        details.append(f"pins checked for: {focus} and its {max(0, len(p['closure']) - 1)} dependencies")
    yield ok(summary, details="\n".join(details), data=data)


def script_modules(spec) -> list[str]:
    """Top-level modules the script imports (read with ast, never run): their distributions are the job's too."""
    if spec.script is None or not spec.script.is_file() or spec.script.suffix not in ("", ".py"):
        return []
    raw = read_head(spec.script, SCRIPT_LIMIT)  # never the whole of a file of unknown size
    if raw is None or len(raw) > SCRIPT_LIMIT:
        return []
    try:
        tree = ast.parse(raw)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # imports.smoke reports a script that does not compile
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found = [node.module]
        else:
            continue
        for n in found:
            top = n.split(".")[0]
            if top not in names:
                names.append(top)
    return names


def collect(ctx, there: Optional[Files] = None) -> tuple[list[Requirement], list[Skipped], list[Result], list[str]]:
    """Requirements from the default files in ctx.cwd and from ctx.requirements, with problems found reading them.
    `there`: the target's files, when they were read already (else they are fetched here)."""
    reqs: list[Requirement] = []
    skipped: list[Skipped] = []
    problems: list[Result] = []
    sources: list[str] = []
    files: list[tuple[Path, Files]] = []
    # On a --target, ctx.cwd names a folder there: its files are read there (target_files.py), never from a folder
    # of that name here (another machine's). --requirements files are this machine's.
    here = ctx.target.runs_here
    if there is None:
        there = HERE if here else target_files.fetch(ctx, _target_paths(ctx), includes=_includes_of,
                                                     depth=MAX_INCLUDE_DEPTH)
    if there.problem:
        problems.append(warn(f"the requirements files in {ctx.cwd} on the target could not be read: {there.problem}",
                             fix="Give them with --requirements FILE from this machine."))
    default_txt = ctx.cwd / "requirements.txt"
    if there.has(default_txt):
        files.append((default_txt, there))
    for f in ctx.requirements or []:
        path = ctx.abspath(f) if here else Path(f).resolve()
        if path not in [x for x, _ in files]:
            files.append((path, HERE))
    pyproject = ctx.cwd / "pyproject.toml"
    if there.has(pyproject) and pyproject not in [x for x, _ in files]:
        files.append((pyproject, there))
    for path, view in files:
        if not view.has(path):
            problems.append(error(f"requirements file {path} does not exist", fix="check the --requirements path"))
            continue
        label = _label(path, ctx.cwd)
        try:
            if path.name == "pyproject.toml" or path.suffix == ".toml":
                got = read_pyproject(path, label, view)
            else:
                got = read_requirements(path, ctx.cwd, ctx.env, files=view)
        except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
            problems.append(warn(f"cannot read {label}: {exc}", fix="fix the file's syntax"))
            continue
        if got is None:
            continue
        r, s = got
        reqs += r
        skipped += s
        sources.append(label)
    return reqs, skipped, problems, sources


def read_pyproject(path: Path, label: str, files: Optional[Files] = None) -> Optional[tuple[list[Requirement],
                                                                                     list[Skipped]]]:
    """`[project] dependencies` of a pyproject.toml (None when it declares none)."""
    import tomllib  # here: it compiles its regular expressions as it loads, 0.003 CPU-s of every check and launch
    doc = tomllib.loads((files or HERE).text(path) or "")
    project = doc.get("project") or {}
    deps = project.get("dependencies")
    if deps is None:
        return None  # `dynamic`, poetry or no project table: nothing declared here in PEP 621 form
    if not isinstance(deps, list):
        raise ValueError("[project] dependencies must be a list of strings")
    return [Requirement(str(d), f"{label} [project] dependencies") for d in deps], []


_INCLUDE = compile_later(r"^(-r|--requirement|-c|--constraint)(?:\s*=\s*|\s+|(?=[^\s-]))(.+)$")
_ENV_VAR = compile_later(r"\$\{([A-Z0-9_]+)\}")


def read_requirements(path: Path, cwd: Path, env: dict[str, str], constraint: bool = False,
                      depth: int = 0, seen: Optional[set] = None,
                      files: Optional[Files] = None) -> tuple[list[Requirement], list[Skipped]]:
    """Parse a pip requirements file: comments, continuations, -r/-c includes, options, -e and local paths.
    `files`: where the files are read (this machine's by default, or what was fetched from a target)."""
    files = files or HERE
    seen = set() if seen is None else seen
    real = files.key(path)
    if real in seen or depth > MAX_INCLUDE_DEPTH:
        return [], []
    seen.add(real)
    reqs: list[Requirement] = []
    skipped: list[Skipped] = []
    label = _label(path, cwd)
    why = _not_requirements(path, files) if depth == 0 else None  # an include is judged at its `-r` line
    if why:
        return [], [Skipped(label, label, why)]
    for lineno, line in _logical_lines(files.text(path) or ""):
        source = f"{label}:{lineno}"
        line = _ENV_VAR.sub(lambda m: env.get(m.group(1), m.group(0)), line)
        inc_m = _INCLUDE.match(line)
        if inc_m:
            is_c = inc_m.group(1) in ("-c", "--constraint")
            inc = _include_path(path, inc_m.group(2))
            if not files.has(inc):
                skipped.append(Skipped(line, source, f"included file {inc} not found"))
                continue
            why = _not_requirements(inc, files)
            if why:  # never its lines in a report: `-r keys/deploy_key` would print the key
                skipped.append(Skipped(line, source, why))
                continue
            r, s = read_requirements(inc, cwd, env, constraint or is_c, depth + 1, seen, files)
            reqs += r
            skipped += s
            continue
        if line.startswith(("-e", "--editable")):
            skipped.append(Skipped(line, source, "editable install"))
            continue
        if line.startswith("-"):
            continue  # --index-url, --hash-only options, --pre: about where to download, not what to have
        line = re.sub(r"\s--hash[=\s]\S+", "", line).strip()
        if re.match(r"^(\.{0,2}/|[a-z+]+://|file:)", line) or line.endswith((".whl", ".tar.gz", ".zip")) and "@" not in line:
            skipped.append(Skipped(line, source, "a local path or URL without a name"))
            continue
        line = re.sub(r"\s--\S+(\s|$)", " ", line).strip()  # per-requirement options like --global-option
        reqs.append(Requirement(re.sub(r"\s+", " ", line), source, constraint))
    return reqs, skipped


_ARMOR = compile_later(r"^-----BEGIN [A-Z0-9 ]+-----", re.M)


def _not_requirements(path: Path, files: Files) -> Optional[str]:
    """Why a file that is there is not read as requirements, or None: too large to be one (`-r data/corpus.txt`,
    never read whole), or a PEM block (`-r keys/deploy_key`: a private key, whose lines must never be quoted)."""
    text = files.text(path)
    if text is None:
        return f"not a regular file of at most {target_files.MAX_BYTES >> 20} MiB: not a requirements file, not read"
    if _ARMOR.search(text):
        return "it holds a PEM block (a key or certificate), not requirements: not read"
    return None


def _include_path(path: Path, target: str) -> Path:
    """Where an `-r`/`-c` line of `path` points: absolute, or beside the including file."""
    target = target.strip()
    return Path(target) if os.path.isabs(target) else path.parent / target


def _includes_of(path: Path, text: str, env: dict[str, str]) -> list[Path]:
    """The files a requirements file includes (what must be fetched with it from a target)."""
    if path.name == "pyproject.toml":
        return []
    found = []
    for _, line in _logical_lines(text):
        m = _INCLUDE.match(_ENV_VAR.sub(lambda v: env.get(v.group(1), v.group(0)), line))
        if m:
            found.append(_include_path(path, m.group(2)))
    return found


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, text) of each logical line, comments removed, continuations joined."""
    buf, start = "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not buf:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        full = (buf + line).strip()
        buf = ""
        if full:
            yield start, full
    if buf.strip():
        yield start, buf.strip()


def _unpaired(ctx, p: dict, data: dict) -> Iterator[Result]:
    """torchvision/torchaudio not of the release or build paired with the installed torch: their compiled
    operators fail to load (`operator torchvision::nms does not exist`). Read from the installed metadata."""
    family = p.get("torch_family") or {}
    torch_v = family.get("torch")
    if not torch_v:
        return
    for name in ("torchvision", "torchaudio"):
        have = family.get(name)
        want = torch_pairs.paired(torch_v, name)
        if not have or not want:
            continue
        release_ok = have.split("+")[0] == want
        build_ok = torch_pairs.build(have) == torch_pairs.build(torch_v)
        if release_ok and build_ok:
            continue
        why = (f"{name} {have} is not the release paired with torch {torch_v} ({want})" if not release_ok else
               f"{name} {have} is a {_build_name(have)} build beside a {_build_name(torch_v)} torch {torch_v}")
        used = name in (p.get("imported") or []) or any(r["name"] == name for r in p["results"])
        yield (fail if used else warn)(
            f"{why}: its compiled operators will not load with this torch", causes.DEPENDENCY_MISMATCH,
            evidence=(f"installed: torch {torch_v}, {name} {have}",
                      f"paired with torch {torch_v}: {name} {want}" + (f"+{torch_pairs.build(torch_v)}"
                                                                       if torch_pairs.build(torch_v) else "")),
            fix=torch_pairs.install_line(torch_v, [name], ctx.python) + "   (the pair from torch's own index; "
                "dfdoctor did not run it)", data=data)


def _build_name(version: str) -> str:
    """'CPU', 'CUDA 12.1' or 'default (PyPI)' for a version's build tag."""
    tag = torch_pairs.build(version)
    if tag is None:
        return "default PyPI (CUDA on Linux)"
    if tag == "cpu":
        return "CPU"
    return f"CUDA {tag[2:-1]}.{tag[-1]}" if tag.startswith("cu") and tag[2:].isdigit() else tag


def _paired_fix(ctx, p: dict, name: str) -> Optional[str]:
    """For a missing torchvision/torchaudio: the version paired with the installed torch, from its index (a bare
    `pip install torchvision` would replace that torch with the newest pair)."""
    torch_v = (p.get("torch_family") or {}).get("torch")
    if name.lower() not in ("torchvision", "torchaudio") or not torch_v or not torch_pairs.paired(torch_v, name.lower()):
        return None
    return torch_pairs.install_line(torch_v, [name.lower()], ctx.python) + "   (paired with the installed torch)"


def _pin(r: dict) -> str:
    """The requirement to install, without its marker (it applies here, that is why it is reported)."""
    return r["req"].split(";")[0].strip()


def _conflict_text(c: dict) -> str:
    """pip check's wording, so it reads familiar."""
    req = c["requirement"].split(";")[0].strip()
    if c["problem"] == "missing":
        return f"{c['dist']} {c['version']} requires {req}, which is not installed"
    return f"{c['dist']} {c['version']} requires {req}, but {c['name']} {c['installed']} is installed"


def _file_of(r: dict) -> str:
    """The requirements file a probe result came from (its source is `FILE:LINE`)."""
    return r["source"].rsplit(":", 1)[0]


def _whole_file_fixes(ctx, results: list[dict], readme: Sequence[ReadmeLine]) -> dict[str, str]:
    """For a requirements file with two or more lines missing or mismatched that the project's README installs
    with `pip install -r FILE`, that line (in the job's interpreter) rather than a list of names copied out of it:
    {file: fix}. Only where the README says so (`readme`: its install lines, read with the job's imports): a file
    with `--hash` lines or `-e .` may not install as a whole."""
    bad: dict[str, int] = {}
    for r in results:
        if r["status"] in ("missing", "mismatch") and _file_of(r).endswith(".txt"):
            bad[_file_of(r)] = bad.get(_file_of(r), 0) + 1
    fixes = {}
    for file, n in bad.items():
        if n > 1:
            said = next((r for r in readme if "-r" in r.words and Path(r.words[-1]).name == Path(file).name), None)
            if said:
                fixes[file] = (f"{shlex.quote(ctx.python)} -m pip install -r {shlex.quote(file)}   ({n} of its lines "
                               f"are missing or mismatched; {said.file}:{said.line} installs with `{said.text}`)")
    return fixes


def _label(path: Path, cwd: Path) -> str:
    """How a file is named in findings: relative to the job's folder when inside it."""
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)

