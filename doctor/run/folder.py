"""Run folders: where each launch keeps its spec, its append-only record and its output copies.

A run lives in `<cwd>/.dfdoctor/runs/<id>/` (or the folder `--run-dir` names). Ids sort by time, so the
latest run is the last name. Old runs are pruned by count; a run whose recorder still lives never is.
`RunFolder` is one folder as this process writes dfdoctor's notes into it, through one masker.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Optional

from dfdoctor.cache import cache_dir
from dfdoctor.redact import Redactor, SecretPrints
from dfdoctor.run import events, index, marker, masks, record
from dfdoctor.agent.names import LAUNCHER, SPEC

RUNS_SUBDIR = Path(".dfdoctor") / "runs"
DEFAULT_KEEP = 20


class RunNotFound(LookupError):
    """No run folder matches what the user named."""


def runs_root(cwd: Path) -> Path:
    """The folder holding the run folders of launches made from `cwd`."""
    return Path(cwd) / RUNS_SUBDIR


GITIGNORE = "# Created by dfdoctor: run folders hold the output of jobs and are not for version control.\n*\n"


def ignore_all(folder: Path) -> None:
    """`.dfdoctor/.gitignore` with `*`, as pytest, mypy and ruff put into their cache folders: `git add -A` must
    not stage run folders. Made only when missing (O_EXCL), never rewritten; a folder that cannot take it is left
    as it is (the launch goes on)."""
    try:
        fd = os.open(folder / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError:
        return
    try:
        os.write(fd, GITIGNORE.encode())
    finally:
        os.close(fd)


def new_run(cwd: Path, run_dir: Optional[Path] = None) -> tuple[str, Path]:
    """Create a fresh private (0700) run folder, marked as dfdoctor's, and return (id, path).

    An explicit `run_dir` must be new or empty: a folder holding anything (a run, or the user's own files) is
    refused with FileExistsError. When `cwd` cannot hold run folders (read-only, not ours), the run folder
    is made in dfdoctor's cache folder instead; the report names it.
    """
    # secrets.token_hex(2) is os.urandom(2).hex(); the secrets module imported hmac and with it OpenSSL
    run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(2).hex()
    if run_dir is not None:
        path = Path(run_dir).absolute()
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            if not path.is_dir() or any(os.scandir(path)):
                what = "already holds a run" if marker.run_id(path) else "is not empty"
                raise FileExistsError(f"--run-dir {path} {what}: choose a new or empty folder") from None
            os.chmod(path, 0o700)
        marker.write(path, run_id)
        marker.hold(path)  # until this process ends: another launch's pruning leaves it alone
        RunFolder.forget(path)  # a new run in a folder this process wrote before: nothing of that run is kept
        index.record(run_id, path, cwd)
        return run_id, path
    try:
        root = runs_root(cwd)
        root.mkdir(parents=True, exist_ok=True)
        ignore_all(root.parent)
        path = root / run_id
        path.mkdir(mode=0o700)
    except OSError:
        fallback = cache_dir() / "runs"
        fallback.mkdir(parents=True, exist_ok=True, mode=0o700)
        import tempfile  # a run folder that cannot be made under --cwd alone (random and shutil behind it)
        path = Path(tempfile.mkdtemp(prefix=run_id + "-", dir=fallback))
    marker.write(path, run_id)
    marker.hold(path)  # until this process ends: another launch's pruning leaves it alone
    index.record(run_id, path, cwd)
    return run_id, path


def is_run_dir(path: Path) -> bool:
    """Whether dfdoctor made this folder for a run (its marker says so; a file name alone does not)."""
    return marker.run_id(path) is not None


def list_runs(cwd: Path) -> list[Path]:
    """The run folders under `cwd`, oldest first (by when their spec was written: ids of one second tie)."""
    root = runs_root(cwd)
    if not root.is_dir():
        return []
    runs = []
    for p in root.iterdir():
        if not is_run_dir(p):
            continue
        try:
            runs.append(((p / SPEC).stat().st_mtime_ns, p.name, p))
        except OSError:
            continue  # not a run folder (yet)
    return [p for _, _, p in sorted(runs)]


def prune(cwd: Path, keep: int = DEFAULT_KEEP) -> list[Path]:
    """Delete the oldest run folders beyond `keep`, never one whose recorder still runs nor one a dfdoctor process
    still works on (its launch writing the report after the job ended: marker.in_use); return those deleted."""
    import shutil  # a launch's alone: `report` and `status` read run folders and delete none
    runs = list_runs(cwd)
    removed = []
    for path in runs[: max(0, len(runs) - max(1, keep))]:
        if marker.in_use(path):
            continue
        run = record.load(path)
        if run.recorder_alive() or (run.is_remote and not run.finished):
            continue  # a remote run's liveness is not known here: keep its copy until its record says it ended
        masks.forget_prints(path)
        RunFolder.forget(path)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def find_run(cwd: Path, ref: Optional[str] = None) -> Path:
    """The run folder `ref` names (a path, an id or an id prefix); the latest run when `ref` is None. This process
    holds it from now on (marker.hold): `status` writing its report there is never pruned under it."""
    path = _find_run(cwd, ref)
    marker.hold(path)
    return path


def _find_run(cwd: Path, ref: Optional[str] = None) -> Path:
    if ref:
        p = Path(ref)
        if p.is_dir() and is_run_dir(p):
            return p.absolute()
        matches = [r for r in list_runs(cwd) if r.name.startswith(ref)]
        exact = [r for r in matches if r.name == ref]
        if not matches and not p.is_dir():  # not here: the user's index of runs knows every folder's
            matches = exact = index.find(ref)
        if len(matches) == 1 or len(exact) == 1:
            return (exact or matches)[0]
        if matches:
            raise RunNotFound(f"run {ref!r} is ambiguous: {', '.join(m.name for m in matches)}")
        if p.is_dir():
            raise RunNotFound(f"{ref} is not a dfdoctor run folder (it has no {marker.NAME} marker)")
        raise RunNotFound(f"no run {ref!r} (looked for a run folder at that path, under {runs_root(cwd)} and in "
                          f"the index of your runs, {index.state_dir() / index.INDEX})")
    runs = list_runs(cwd)
    if runs:
        return runs[-1]
    latest = index.latest()  # none launched from here: the user's latest, wherever it was launched
    if latest is None:
        raise RunNotFound(f"no runs under {runs_root(cwd)} nor in the index of your runs "
                          f"({index.state_dir() / index.INDEX}); start one with `dfdoctor launch -- COMMAND`")
    return latest


def latest_from(cwd: Path) -> Optional[Path]:
    """The latest run launched from `cwd`, never one launched elsewhere: its own run folders, else the index's
    latest whose launch was made there (its folder elsewhere, --run-dir). None when there is none."""
    runs = list_runs(cwd)
    return runs[-1] if runs else index.latest(cwd=cwd)


class RunFolder:
    """One run folder as this process writes it: dfdoctor's notes (launcher.jsonl) go through one masker, built
    from this shell's secrets the first time a note is written, and the launch's fingerprints (masks.json) are
    read once, not again for every note. `RunFolder.at(path)` gives the one object of a folder in this process."""

    _open: dict[Path, "RunFolder"] = {}

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._masker: Optional[Redactor] = None
        self._prints: Optional[SecretPrints] = None
        self._prints_read = False

    @classmethod
    def at(cls, path: Path) -> "RunFolder":
        """The RunFolder of `path` in this process (made on first use)."""
        key = Path(path).absolute()
        folder = cls._open.get(key)
        if folder is None:
            folder = cls._open[key] = cls(path)
        return folder

    @classmethod
    def forget(cls, path: Path) -> None:
        """Drop the object of a folder that goes (pruned)."""
        cls._open.pop(Path(path).absolute(), None)

    @property
    def prints(self) -> Optional[SecretPrints]:
        """The launch's secret fingerprints (masks.json and its key), read the first time they are asked for."""
        if not self._prints_read:
            self._prints, self._prints_read = masks.load_prints(self.path), True
        return self._prints

    def keep_prints(self, env: dict[str, str], argv: list[str]) -> None:
        """Keep the launch's secrets as fingerprints in masks.json (masks.keep_prints), and mask with them."""
        masks.keep_prints(self.path, env, argv)
        self._prints_read = False

    def masker(self) -> Redactor:
        """The one masker of this folder's notes: this shell's secrets (built once); each note adds what it
        reveals itself (its argv, what the fingerprints recognise in it)."""
        if self._masker is None:
            self._masker = masks.masker()
        return self._masker

    def append_event(self, name: str, **data: Any) -> None:
        """dfdoctor's own notes about the run (launched, detached), kept apart from the recorder's record, masked."""
        red = self.masker()
        red.learn_argv([w for w in data.get("argv") or () if isinstance(w, str)])
        red.learn_prints(self.prints, data)
        events.append(self.path / LAUNCHER, red, name, data)

    def load(self, remote: Optional[dict[str, Any]] = None) -> record.RunRecord:
        """The run as its folder says now (record.load)."""
        return record.load(self.path, remote)


def append_event(run_dir: Path, name: str, **data: Any) -> None:
    """dfdoctor's own notes about the run in `run_dir` (RunFolder.append_event of its one RunFolder)."""
    RunFolder.at(run_dir).append_event(name, **data)
