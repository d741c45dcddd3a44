"""Run folders: where each launch keeps its spec, its append-only record and its output copies.

A run lives in `<cwd>/.dfdoctor/runs/<id>/` (or the folder `--run-dir` names). Ids sort by time, so the
latest run is the last name. Old runs are pruned by count; a run whose recorder still lives never is.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from dfdoctor import runindex
from dfdoctor.agent.procfs import proc_start_time, read_text
from dfdoctor.cache import cache_dir, private_dir
from dfdoctor.launch import marker
from dfdoctor.safefile import write_atomically
from dfdoctor.redact import Redactor, SecretPrints

RUNS_SUBDIR = Path(".dfdoctor") / "runs"
DEFAULT_KEEP = 20
RECORD = "record.jsonl"
LAUNCHER = "launcher.jsonl"
MASKS = "masks.json"  # the launch's secrets as keyed fingerprints (redact.SecretPrints), never the values
KEYS_SUBDIR = "masks"  # under the cache folder: the fingerprints' keys, one per run, never in a run folder


class RunNotFound(LookupError):
    """No run folder matches what the user named."""


def runs_root(cwd: Path) -> Path:
    """The folder holding the run folders of launches made from `cwd`."""
    return Path(cwd) / RUNS_SUBDIR


def new_run(cwd: Path, run_dir: Optional[Path] = None) -> tuple[str, Path]:
    """Create a fresh private (0700) run folder, marked as dfdoctor's, and return (id, path).

    An explicit `run_dir` must be new or empty: a folder holding anything (a run, or the user's own files) is
    refused with FileExistsError. When `cwd` cannot hold run folders (read-only, not ours), the run folder
    is made in dfdoctor's cache folder instead; the report names it.
    """
    run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)
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
        runindex.record(run_id, path, cwd)
        return run_id, path
    try:
        root = runs_root(cwd)
        root.mkdir(parents=True, exist_ok=True)
        path = root / run_id
        path.mkdir(mode=0o700)
    except OSError:
        fallback = cache_dir() / "runs"
        fallback.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = Path(tempfile.mkdtemp(prefix=run_id + "-", dir=fallback))
    marker.write(path, run_id)
    runindex.record(run_id, path, cwd)
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
            runs.append(((p / "spec.json").stat().st_mtime_ns, p.name, p))
        except OSError:
            continue  # not a run folder (yet)
    return [p for _, _, p in sorted(runs)]


def prune(cwd: Path, keep: int = DEFAULT_KEEP) -> list[Path]:
    """Delete the oldest run folders beyond `keep`, never one whose recorder still runs; return those deleted."""
    runs = list_runs(cwd)
    removed = []
    for path in runs[: max(0, len(runs) - max(1, keep))]:
        run = load(path)
        if run.recorder_alive() or (run.is_remote and not run.finished):
            continue  # a remote run's liveness is not known here: keep its copy until its record says it ended
        forget_prints(path)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def find_run(cwd: Path, ref: Optional[str] = None) -> Path:
    """The run folder `ref` names (a path, an id or an id prefix); the latest run when `ref` is None."""
    if ref:
        p = Path(ref)
        if p.is_dir() and is_run_dir(p):
            return p.absolute()
        matches = [r for r in list_runs(cwd) if r.name.startswith(ref)]
        exact = [r for r in matches if r.name == ref]
        if not matches and not p.is_dir():  # not here: the user's index of runs knows every folder's
            matches = exact = runindex.find(ref)
        if len(matches) == 1 or len(exact) == 1:
            return (exact or matches)[0]
        if matches:
            raise RunNotFound(f"run {ref!r} is ambiguous: {', '.join(m.name for m in matches)}")
        if p.is_dir():
            raise RunNotFound(f"{ref} is not a dfdoctor run folder (it has no {marker.NAME} marker)")
        raise RunNotFound(f"no run {ref!r} (looked for a run folder at that path, under {runs_root(cwd)} and in "
                          f"the index of your runs, {runindex.state_dir() / runindex.INDEX})")
    runs = list_runs(cwd)
    if runs:
        return runs[-1]
    latest = runindex.latest()  # none launched from here: the user's latest, wherever it was launched
    if latest is None:
        raise RunNotFound(f"no runs under {runs_root(cwd)} nor in the index of your runs "
                          f"({runindex.state_dir() / runindex.INDEX}); start one with `dfdoctor launch -- COMMAND`")
    return latest


def masker(env: Optional[dict[str, str]] = None, argv: Any = ()) -> Redactor:
    """The redactor for what dfdoctor keeps of a run: the secrets of `env` (default: ours) and of the job's
    argv, by the rules of every output."""
    red = Redactor.from_env(dict(os.environ if env is None else env))
    red.learn_argv([w for w in argv or () if isinstance(w, str)])
    return red


def masked(obj: Any, env: Optional[dict[str, str]] = None, argv: Any = ()) -> Any:
    """A JSON-like value as a run folder may keep it: secrets masked."""
    return masker(env, argv).value(obj)


def _key_file(key_id: str) -> Path:
    return cache_dir() / KEYS_SUBDIR / f"{key_id}.key"


def keep_prints(run_dir: Path, env: dict[str, str], argv: list[str]) -> None:
    """Keep the launch's secrets (its environment's and its argv's) as keyed fingerprints in RUN_DIR/masks.json,
    so a later `status` or `report` in a shell without them still masks them; no file here holds a value.

    The fingerprints' key is kept apart, in this user's private cache (KEYS_SUBDIR, 0700, the key 0600), named by
    a random id that masks.json holds: the run folder alone lets no one test a guess. A cache that cannot be
    written keeps no key, and then no fingerprints (later masking goes by names and shapes only)."""
    key, key_id = os.urandom(32), secrets.token_hex(16)
    try:
        private_dir(_key_file(key_id).parent)
        fd = os.open(_key_file(key_id), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
        doc = {"key_id": key_id, **SecretPrints.of(masker(env, argv).values, key).to_dict()}
    except OSError:
        doc = {"key_id": None, "prints": []}
    fd = os.open(Path(run_dir) / MASKS, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f)


def load_prints(run_dir: Path) -> Optional[SecretPrints]:
    """The launch's secret fingerprints kept in the run folder, with their key from this user's cache; None
    when either is missing."""
    try:
        doc = json.loads((Path(run_dir) / MASKS).read_text())
        key_id = str(doc.get("key_id") or "")
        if not key_id.isalnum() or not key_id.isascii():
            return None
        return SecretPrints.from_dict(doc, _key_file(key_id).read_bytes())
    except (OSError, ValueError, AttributeError):
        return None


def forget_prints(run_dir: Path) -> None:
    """Delete the key of a run's fingerprints (when the run folder goes)."""
    try:
        key_id = str(json.loads((Path(run_dir) / MASKS).read_text()).get("key_id") or "")
        if key_id.isalnum() and key_id.isascii():
            _key_file(key_id).unlink()
    except (OSError, ValueError, AttributeError):
        pass


def append_event(run_dir: Path, name: str, **data: Any) -> None:
    """dfdoctor's own notes about the run (launched, detached), kept apart from the recorder's record, masked."""
    red = masker(argv=data.get("argv") or ())
    red.learn_prints(load_prints(run_dir), data)
    data = red.value(data)
    data.update(t=round(time.time(), 6), event=name)
    line = (json.dumps(data, default=str, sort_keys=True) + "\n").encode()
    try:  # a note that cannot be written (a full disk) must not stop a launch whose job already runs
        fd = os.open(run_dir / LAUNCHER, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        os.write(fd, line)
    except OSError:
        pass
    finally:
        os.close(fd)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Events from a JSON-lines file; a torn last line (a crash mid-write) is skipped, not fatal."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    events = []
    for line in data.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if isinstance(ev, dict) and "event" in ev:
            events.append(ev)
    return events


@dataclass
class RunRecord:
    """Everything a run folder says about one launch."""

    dir: Path
    spec: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    launcher: list[dict[str, Any]] = field(default_factory=list)
    heartbeat: Optional[dict[str, Any]] = None
    # For a run on a --target: what a session there just saw (recorder_alive, job_alive, boot_id, live), since
    # this machine's /proc knows nothing of those pids. An empty dict: not looked at, so nothing is known alive.
    remote: Optional[dict[str, Any]] = None

    @property
    def is_remote(self) -> bool:
        """The job runs on another target; this folder is the local copy of its record."""
        return self.spec.get("target") not in (None, "local")

    def boot_id(self) -> Optional[str]:
        """The current boot id where the job runs (this machine's, or the target's as last fetched)."""
        if self.remote is not None:
            return self.remote.get("boot_id")
        return (read_text("/proc/sys/kernel/random/boot_id") or "").strip() or None

    @property
    def id(self) -> str:
        """The run's id (its folder's name when the spec lacks one)."""
        return self.spec.get("run_id") or self.dir.name

    def first(self, name: str) -> Optional[dict[str, Any]]:
        """The first event called `name`, or None."""
        return next((e for e in self.events if e["event"] == name), None)

    def all(self, name: str) -> list[dict[str, Any]]:
        """Every event called `name`, in order."""
        return [e for e in self.events if e["event"] == name]

    @property
    def recorder(self) -> Optional[dict[str, Any]]:
        """The recorder's self-description: pid, host, boot id, cgroups."""
        return self.first("recorder")

    @property
    def spawned(self) -> Optional[dict[str, Any]]:
        """The job's start: pid, argv, cwd, masked environment."""
        return self.first("spawned")

    @property
    def exit(self) -> Optional[dict[str, Any]]:
        """How the job ended: status or signal, resources, OOM counters."""
        return self.first("exit")

    @property
    def finished(self) -> bool:
        """The recorder wrote its last word: the job ended (and whatever it handed its work to), or it was
        never started."""
        return self.first("recorder-exit") is not None or (self.exit is not None and not self.handoff_open)

    @property
    def handoff_open(self) -> bool:
        """The command exited 0, but processes it started still hold its output and the recorder relays it: the
        work may go on there. (After a failure, stragglers holding the pipes are relayed too, but the failure
        is the verdict: nothing waits for them.)"""
        return (self.first("handoff") is not None and self.first("handoff-ended") is None
                and (self.exit or {}).get("exit_code") == 0)

    @property
    def job_pid(self) -> Optional[int]:
        """The job's pid, once it was started."""
        return self.spawned["pid"] if self.spawned else None

    def recorder_alive(self) -> bool:
        """The recorder process of this run still runs (same pid, start time and boot)."""
        rec = self.recorder
        if not rec or self.first("recorder-exit"):
            return False
        if self.remote is not None:
            return bool(self.remote.get("recorder_alive"))
        if rec.get("boot_id") and rec["boot_id"] != (read_text("/proc/sys/kernel/random/boot_id") or "").strip():
            return False
        return proc_start_time(rec["pid"]) == rec.get("start_ticks")

    def job_alive(self) -> bool:
        """The job's main process still runs (same pid and start time)."""
        sp = self.spawned
        if sp and self.exit and self.handoff_open:  # the work goes on in what it handed off to
            return self.recorder_alive()
        if not sp or self.exit:
            return False
        if self.remote is not None:
            return bool(self.remote.get("job_alive"))
        if self.recorder and self.recorder.get("boot_id") and \
                self.recorder["boot_id"] != (read_text("/proc/sys/kernel/random/boot_id") or "").strip():
            return False
        return proc_start_time(sp["pid"]) == sp.get("start_ticks")

    def output_bytes(self) -> int:
        """How many bytes the job wrote to stdout and stderr so far."""
        hb = self.heartbeat or {}
        # While a hand-off is relayed the heartbeat keeps counting; the end's own counts are final.
        ex = {} if self.handoff_open else (self.first("handoff-ended") or self.exit or {})
        return int(ex.get("stdout_bytes", hb.get("stdout_bytes") or 0) or 0) + \
            int(ex.get("stderr_bytes", hb.get("stderr_bytes") or 0) or 0)

    def stream(self, name: str, limit: int = 64 << 10) -> str:
        """The last `limit` bytes the job wrote on `name` (stdout or stderr), from the capped copies."""
        return read_stream(self.dir, name, limit)


def load(run_dir: Path, remote: Optional[dict[str, Any]] = None) -> RunRecord:
    """Read a run folder as it is now (safe while the recorder is still writing).

    For the local copy of a run on a --target, `remote` is what a session there saw (see `mirror`); without
    it nothing of such a run counts as alive.
    """
    run_dir = Path(run_dir)
    try:
        spec = json.loads((run_dir / "spec.json").read_text())
    except (OSError, ValueError):
        spec = {}
    hb = None
    try:
        hb = json.loads((run_dir / "heartbeat").read_text())
    except (OSError, ValueError):
        pass
    run = RunRecord(run_dir, spec, _read_jsonl(run_dir / RECORD), _read_jsonl(run_dir / LAUNCHER), hb)
    if run.is_remote:
        run.remote = dict(remote or {})
    return run


# The files of a remote run folder that are copied here; the local spec.json (which names the target) and
# launcher.jsonl (dfdoctor's own notes) are this machine's.
MIRRORED = ("record.jsonl", "heartbeat", "recorder.out", "stdout.log", "stderr.log")


def mirror(run_dir: Path, answer: dict[str, Any]) -> None:
    """Copy what a session on the target fetched (`dfdoctor.launch.remote_run.fetch`) into the local run folder.

    Each file is replaced atomically, so a reader never sees half of one; a file the answer lacks is kept.
    """
    for name in MIRRORED:
        text = (answer.get("files") or {}).get(name)
        if text is None:
            continue
        write_atomically(Path(run_dir) / name, text, private=True)


def read_stream(run_dir: Path, name: str, limit: int = 64 << 10) -> str:
    """Reassemble a capped stream copy (head, then the older and newer tail segments); keep the last `limit`."""
    parts = []
    head = Path(run_dir) / f"{name}.log"
    segs = [Path(run_dir) / f"{name}.tail.{i}" for i in (0, 1)]
    segs = sorted((s for s in segs if s.exists()), key=lambda s: s.stat().st_mtime_ns)
    for p in [head, *segs]:
        try:
            with open(p, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - limit))
                parts.append(f.read())
        except OSError:
            continue
    data = b"".join(parts)[-limit:]
    return data.decode("utf-8", "replace")
