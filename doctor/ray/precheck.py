"""The checks of a `ray job submit` line before it is submitted, each a short story: Ray's CLI is here; the
address answers and takes our token; the entrypoint's request fits a node; the working_dir exists, is under the
job server's upload limit, and holds the script; the runtime env's pip list is there and the index has its pins
(pins.py). What is observed (an answer, a file that is not there, the nodes' totals) may fail;
what is only read (an upload size from our reading of .gitignore) warns."""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import shutil
import time
from pathlib import Path
from typing import Callable, Mapping, Optional

from dfdoctor import causes
from dfdoctor.model import STATIC, CheckRecord, Status
from dfdoctor.ray import pins
from dfdoctor.ray.api import Api, ApiError
from dfdoctor.ray.rules import _misses
from dfdoctor.ray.submit import RaySubmission

UPLOAD_LIMIT = 100 << 20  # the job server refuses a body over 100 MiB (HTTP 413), whatever Ray's warning says


def _rec(cid: str, status: Status, summary: str, cause: Optional[str] = None, fix: str = "",
         evidence: Optional[list[str]] = None, basis: Optional[str] = None) -> CheckRecord:
    r = CheckRecord(id=cid, phase="pre", status=status, summary=summary, cause=cause, fix=fix,
                    evidence=evidence or [], title=cid)
    if basis:
        r.basis = basis
    return r


def cli(sub: RaySubmission, env: Mapping[str, str]) -> CheckRecord:
    """Ray's CLI is here: it packs the working_dir and submits (a `--target ray://` line runs it too)."""
    found = shutil.which(sub.argv[0], path=env.get("PATH"))
    if found:
        return _rec("ray.cli", Status.OK, f"Ray's CLI: {found}")
    return _rec("ray.cli", Status.FAIL, f"`{sub.argv[0]}` (Ray's CLI, which submits the job) is not on PATH here",
                causes.COMMAND_NOT_FOUND, "Install it where you submit from: `pip install 'ray[default]'` (the "
                "cluster's Ray version), or put its venv's bin on PATH.")


def address(sub: RaySubmission, api: Api) -> CheckRecord:
    """The job API answers at the address, and takes our token."""
    try:
        version = api.get("/api/version")
    except ApiError as exc:
        if exc.status in (401, 403):
            return _rec("ray.address", Status.FAIL, f"The Ray cluster at {sub.address} refused us ({exc.status}): "
                        "it has token auth on and " + ("our token is not its" if api.token else "no token was found"),
                        causes.TARGET_UNREACHABLE, "Set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to the cluster's "
                        "token, the one in ~/.ray/auth_token of the user who started the head.", [exc.said])
        return _rec("ray.address", Status.FAIL, f"Nothing answers at {sub.address} ({sub.address_from}): "
                    f"{exc.said}", causes.TARGET_UNREACHABLE,
                    "Give the head's job API: `ray job submit --address http://HEAD:8265` (8265 is the dashboard "
                    "port; ray://HOST:10001 is Ray Client's, not the job API's), and check the head runs.",
                    [f"GET {api.base}/api/version: {exc.said}"])
    return _rec("ray.address", Status.OK, f"Ray {version.get('ray_version', '?')} answers at {sub.address} "
                f"({sub.address_from})")


def resources(sub: RaySubmission, api: Api) -> CheckRecord:
    """The entrypoint's own request against what each live node has in total."""
    if not sub.wants:
        return _rec("ray.resources", Status.SKIP, "The entrypoint asks for no resources of its own")
    try:
        nodes = api.listed("nodes")
    except ApiError as exc:
        return _rec("ray.resources", Status.SKIP, f"The nodes' resources could not be read: {exc.said}")
    short = _misses(sub.wants, nodes)
    totals = [f"node {n.get('node_ip')}: " + ", ".join(f"{k}={v:g}" for k, v in sorted(
        (n.get("resources_total") or {}).items()) if k in ("CPU", "GPU") or k in sub.wants)
        for n in nodes if n.get("state") == "ALIVE"]
    if short:
        wants = ", ".join(f"{k}={v:g}" for k, v in short.items())
        return _rec("ray.resources", Status.FAIL, f"The entrypoint asks for {wants}, which no node of the cluster "
                    "has: Ray would keep the job PENDING for 15 minutes (RAY_JOB_START_TIMEOUT_SECONDS) and "
                    "`ray job stop` could not end it", causes.RAY_INFEASIBLE_RESOURCES,
                    "Ask for what a node has (--entrypoint-num-cpus/--entrypoint-num-gpus), or add such a node.",
                    totals)
    return _rec("ray.resources", Status.OK, "A node has what the entrypoint asks: " +
                ", ".join(f"{k}={v:g}" for k, v in sub.wants.items()), evidence=totals)


def runtime_env(sub: RaySubmission) -> CheckRecord:
    """Ray's CLI builds the runtime env here, before it submits anything: from the YAML file --runtime-env names or
    from --runtime-env-json. A file that is not there or does not parse fails the submission at once; what it holds
    (working_dir, excludes, pip) is what the checks after this one read."""
    given = [o for o in ("--runtime-env", "--runtime-env-json") if o in sub.options]
    if not given:
        return _rec("ray.runtime_env", Status.SKIP, "No --runtime-env or --runtime-env-json is given")
    problem = sub.runtime_env_problem
    if len(given) == 2:
        return _rec("ray.runtime_env", Status.WARN, problem, causes.BAD_ARGUMENTS, "Give one of the two (read "
                    "from Ray's CLI, dashboard_sdk.parse_runtime_env_args; not tried).", basis=STATIC)
    if problem and "cannot be read" in problem:
        return _rec("ray.runtime_env", Status.FAIL, problem, causes.INPUT_MISSING, "Give the runtime env file's "
                    f"path as seen from where `ray job submit` runs ({sub.cwd}); not tried.")
    if problem:
        return _rec("ray.runtime_env", Status.FAIL, problem, causes.CONFIG_INVALID, "Mend the runtime env where "
                    "the error says (PyYAML's and json's own words, as Ray's CLI reads it); not tried.")
    if given == ["--runtime-env"] and not sub.runtime_env and not _yaml_here():
        return _rec("ray.runtime_env", Status.WARN, f"--runtime-env {sub.options['--runtime-env']} was not read: "
                    "PyYAML is not installed in dfdoctor's interpreter, so the checks after this one did not see "
                    "its working_dir, excludes or pip list", fix="Install PyYAML beside dfdoctor (`pip install "
                    "pyyaml`), or give the same env as --runtime-env-json; not tried.")
    source = "--runtime-env-json" if given == ["--runtime-env-json"] else f"--runtime-env {sub.options['--runtime-env']}"
    return _rec("ray.runtime_env", Status.OK, f"{source}: {', '.join(sorted(sub.runtime_env)) or 'empty'}")


def _yaml_here() -> bool:
    return importlib.util.find_spec("yaml") is not None


def working_dir(sub: RaySubmission) -> CheckRecord:
    """The working_dir exists, and what Ray would upload of it is under the job server's limit."""
    wd = sub.working_dir
    if wd is None:
        return _rec("ray.working_dir", Status.SKIP, "No local --working-dir is given")
    if not wd.is_dir():
        return _rec("ray.working_dir", Status.FAIL, f"--working-dir {wd} is not a folder here", causes.INPUT_MISSING,
                    "Give the folder that holds the job's code (it is uploaded to the cluster).")
    size, files = upload_size(wd, sub.runtime_env.get("excludes") or [])
    if size > UPLOAD_LIMIT:
        return _rec("ray.working_dir", Status.WARN, f"--working-dir {wd} holds {size / 2**20:.0f} MiB in {files} "
                    "file(s) (as read here, .gitignore and excludes honoured): the job server refuses an upload "
                    "over 100 MiB (HTTP 413)", causes.INPUT_MISSING,
                    "Leave data and checkpoints out (`excludes` in --runtime-env-json, or .gitignore), or put "
                    "them on shared storage.", basis=STATIC)
    return _rec("ray.working_dir", Status.OK, f"--working-dir {wd}: {size / 2**20:.1f} MiB in {files} file(s) to "
                "upload")


def script(sub: RaySubmission) -> CheckRecord:
    """The entrypoint's script is in the working_dir (where Ray runs it)."""
    name = sub.script
    if name is None:
        return _rec("ray.script", Status.SKIP, "The entrypoint runs no Python script by name")
    wd = sub.working_dir
    if wd is None:
        return _rec("ray.script", Status.WARN, f"No --working-dir: Ray runs `{name}` in the folder the head was "
                    "started from, not in this one", causes.INPUT_MISSING,
                    "Give --working-dir . to send this folder with the job.", basis=STATIC)
    if not wd.is_dir():
        return _rec("ray.script", Status.SKIP, "The working_dir is not there (ray.working_dir)")
    if (wd / name).is_file():
        return _rec("ray.script", Status.OK, f"{name} is in the working_dir {wd}")
    return _rec("ray.script", Status.FAIL, f"{name} is not in the working_dir {wd}: Ray would run the entrypoint "
                "there and Python would not find it", causes.INPUT_MISSING,
                f"Give the folder that holds {name} as --working-dir, or its path inside the working_dir.")


def upload_size(root: Path, excludes: list[str]) -> tuple[int, int]:
    """The bytes and files Ray would pack: .git, the root's .gitignore patterns and `excludes` left out."""
    patterns = list(excludes)
    try:
        patterns += [l.strip().rstrip("/") for l in (root / ".gitignore").read_text().splitlines()
                     if l.strip() and not l.startswith(("#", "!"))]
    except OSError:
        pass

    def out(rel: str) -> bool:
        base = os.path.basename(rel)
        return any(fnmatch.fnmatch(rel, p.lstrip("/")) or fnmatch.fnmatch(base, p) for p in patterns)
    size = files = 0
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames if d != ".git" and not out(os.path.normpath(os.path.join(rel_dir, d)))]
        for f in filenames:
            rel = os.path.normpath(os.path.join(rel_dir, f))
            if out(rel):
                continue
            try:
                size += os.lstat(os.path.join(dirpath, f)).st_size
                files += 1
            except OSError:
                continue
    return size, files


def records(sub: RaySubmission, api: Api, wanted: Callable[[str], bool],
            env: Optional[Mapping[str, str]] = None) -> list[CheckRecord]:
    """Every Ray check `wanted` picks, in the order a reader follows; the address first (the others ask it)."""
    out: list[CheckRecord] = []
    reached = True
    for cid, run in (("ray.cli", lambda: cli(sub, env if env is not None else os.environ)),
                     ("ray.address", lambda: address(sub, api)), ("ray.resources", lambda: resources(sub, api)),
                     ("ray.runtime_env", lambda: runtime_env(sub)), ("ray.working_dir", lambda: working_dir(sub)), ("ray.script", lambda: script(sub)),
                     ("ray.requirements", lambda: pins.check(sub, env if env is not None else os.environ))):
        if not wanted(cid):
            continue
        if cid == "ray.resources" and not reached:
            out.append(_rec(cid, Status.SKIP, "The cluster did not answer (ray.address)"))
            continue
        t0 = time.monotonic()
        r = run()
        r.duration_s = round(time.monotonic() - t0, 3)
        reached = reached and not (cid == "ray.address" and r.status == Status.FAIL)
        out.append(r)
    return out
