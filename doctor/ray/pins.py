"""`ray.requirements`: the runtime env's pip list (a list, a requirements file, or {"packages": ...}) before it is
submitted. A requirements file that is not there makes `ray job submit` fail at once; a pin that no index has
fails on the cluster only after Ray's retries, tens of seconds later (RAY-FACTS.md). Each named package is asked
of the index the way pip itself asks it (`pip index versions NAME`: this machine's pip, its configured index,
nothing downloaded, a time limit on each), a few at a time.

What pip says here is a reproduced failure, so a name or version it cannot find fails; a cluster whose nodes
use another index may differ, which the summary says. Lines that name no plain package (URLs, paths, options,
environment markers) are left unchecked and counted."""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Mapping, Optional

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from dfdoctor import causes
from dfdoctor.model import CheckRecord, Status
from dfdoctor.ray.submit import RaySubmission
from dfdoctor.lazy_re import compile_later

ASK_TIMEOUT_S = 40.0  # one `pip index versions` (pip's own network timeout is set lower: PIP_ARGS)
PIP_ARGS = ("--disable-pip-version-check", "--timeout", "15", "--retries", "1")
AT_ONCE = 4
MOST = 24  # the names asked at most (the rest: said not checked)
AVAILABLE = compile_later(r"^Available versions: (.*)$", re.M)
NOT_FOUND = compile_later(r"^ERROR: (No matching distribution found for .*)$", re.M)
UNREACHED = compile_later(r"Could not fetch URL|NewConnectionError|Failed to establish a new connection|Retrying \(|"
                          r"Temporary failure in name resolution|ConnectTimeout|ReadTimeout")


def pip_entry(sub: RaySubmission) -> tuple[Optional[list[str]], Optional[Path]]:
    """The runtime env's pip packages, and the requirements file they came from (None: a list, or no pip)."""
    pip: Any = sub.runtime_env.get("pip")
    pip = pip.get("packages") if isinstance(pip, dict) else pip
    if isinstance(pip, list):
        return [str(p) for p in pip], None
    if isinstance(pip, str) and pip.strip():
        path = Path(pip).expanduser()
        return None, path if path.is_absolute() else sub.cwd / path  # Ray's CLI reads it from where it runs
    return None, None


def lines_of(path: Path) -> list[str]:
    """A requirements file's requirement lines (comments, blank lines and options left out)."""
    out = []
    for raw in path.read_text(errors="replace").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def asked(name: str, env: Mapping[str, str]) -> tuple[Optional[list[str]], str]:
    """(the versions the index has of `name`, pip's own words); (None, why) when pip could not say."""
    try:
        p = subprocess.run([sys.executable, "-m", "pip", "index", "versions", *PIP_ARGS, name], env=dict(env),
                           capture_output=True, text=True, timeout=ASK_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, f"pip did not answer within {ASK_TIMEOUT_S:g} s"
    except OSError as exc:
        return None, str(exc)
    said = p.stdout + p.stderr
    if UNREACHED.search(said):  # pip could not reach an index: it then finds nothing of anything
        return None, next(l for l in said.splitlines() if UNREACHED.search(l)).strip()[:300]
    found = AVAILABLE.search(said)
    if found:
        return [v.strip() for v in found[1].split(",") if v.strip()], ""
    missing = NOT_FOUND.search(said)
    if missing:
        return [], f"ERROR: {missing[1].strip()}"
    return None, (said.strip().splitlines() or ["pip said nothing"])[-1][:300]


def _fits(req: Requirement, versions: list[str]) -> bool:
    for v in versions:
        try:
            if req.specifier.contains(Version(v), prereleases=True):
                return True
        except InvalidVersion:
            continue
    return False


def check(sub: RaySubmission, env: Mapping[str, str]) -> CheckRecord:
    packages, path = pip_entry(sub)
    if path is not None:
        if not path.is_file():
            return _rec(Status.FAIL, f"The runtime env's requirements file {path} is not there: `ray job submit` "
                        "reads it here and would fail", causes.INPUT_MISSING,
                        "Give the path of the requirements file from the folder you submit in.")
        packages = lines_of(path)
    if not packages:
        return _rec(Status.SKIP, "The runtime env installs no pip packages")
    reqs, unchecked = [], 0
    for line in packages:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            unchecked += 1  # an option, a path, a URL: not a name to ask the index of
            continue
        if req.url or req.marker is not None:
            unchecked += 1
            continue
        reqs.append(req)
    reqs = reqs[:MOST]
    with ThreadPoolExecutor(AT_ONCE) as pool:
        answers = list(pool.map(lambda r: asked(r.name, env), reqs))
    return _verdict(reqs, answers, unchecked, path)


def _verdict(reqs: list[Requirement], answers: list[tuple[Optional[list[str]], str]], unchecked: int,
             path: Optional[Path]) -> CheckRecord:
    bad, unknown = [], []
    for req, (versions, said) in zip(reqs, answers):
        if versions is None:
            unknown.append(f"{req}: {said}")
        elif not versions:
            bad.append(f"{req}: {said}")
        elif not _fits(req, versions):
            bad.append(f"{req}: no version of {req.name} the index has fits {req.specifier} (it has "
                       f"{', '.join(versions[:6])}{', ...' if len(versions) > 6 else ''})")
    where = f" ({path})" if path else ""
    left = f"; {unchecked} line(s) name no plain package and were not asked" if unchecked else ""
    if bad:
        return _rec(Status.FAIL, f"pip here finds no distribution for {len(bad)} of the runtime env's "
                    f"{len(reqs)} pin(s){where}: Ray's setup would fail on the node after its retries"
                    f"{left}", causes.RAY_RUNTIME_ENV_FAILED,
                    "Fix the pin (the line below is pip's own) or the name; a cluster whose nodes use another "
                    "index may have it: then `--skip ray.requirements`.", bad + unknown)
    if unknown and len(unknown) == len(reqs):
        return _rec(Status.SKIP, f"The index could not be asked here ({len(unknown)} name(s)){left}",
                    evidence=unknown)
    return _rec(Status.OK if not unknown else Status.WARN,
                f"pip here finds every one of the runtime env's {len(reqs) - len(unknown)} pin(s){where}"
                + (f"; {len(unknown)} could not be asked" if unknown else "") + left, evidence=unknown)


def _rec(status: Status, summary: str, cause: Optional[str] = None, fix: str = "",
         evidence: Optional[list[str]] = None) -> CheckRecord:
    return CheckRecord(id="ray.requirements", phase="pre", status=status, summary=summary, cause=cause, fix=fix,
                       evidence=evidence or [], title="ray.requirements")
