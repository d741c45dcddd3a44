"""The recorder's record of one launch, as the host reads it back from a run folder (safe while the recorder is
still writing): the spec, both event logs, the heartbeat, the capped output copies, and whether the processes it
names still run here."""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from dfdoctor.agent.procfs import is_job_of, is_recorder_of, proc_start_time, read_text
from dfdoctor.run import events
from dfdoctor.agent.names import (
    HEARTBEAT,
    LAUNCHER,
    MIRRORED,
    RECORD,
    SPEC,
    TAIL_SEGMENTS,
    stream_head,
    stream_tail,
)
from dfdoctor.safefile import write_atomically

# The targets (every kind, subprocess behind them) are imported where a run's target is asked for: `report` reads
# a saved result without (issue 45).
if TYPE_CHECKING:
    from dfdoctor.targets import Target


TARGET_PARTS = "target_parts"


def target_parts(target: Target) -> dict[str, Any]:
    """What a run spec keeps of a target beside its spelling: the parts `str(target)` leaves out, such as the
    user's own ssh options of a typed hop (-F, -i, -J, -o), without which `status` and `stop` would not reach
    where the launch did."""
    return {TARGET_PARTS: [list(p) for p in target.extra]} if target.extra else {}


def target_of_spec(spec: dict[str, Any]) -> Target:
    """The target a run spec names: its spelling parsed, its kept parts put back."""
    from dfdoctor.targets import parse_target  # see the imports
    target = parse_target(spec.get("target"))
    kept = tuple((str(k), str(v)) for k, v in spec.get(TARGET_PARTS) or ())
    return replace(target, extra=(*target.extra, *(p for p in kept if p not in target.extra))) if kept else target


@functools.lru_cache(maxsize=16)
def _runs_here(spelled: Optional[str]) -> bool:
    """Whether a spec's `--target` spelling names this machine: parsed once per spelling (a watch asked it five
    times a read, 20 reads a second; its kind alone says it, not the parts the spelling leaves out)."""
    from dfdoctor.targets import parse_target as parsed  # where the targets are asked for (main: lazily)
    return parsed(spelled).runs_here


@functools.lru_cache(maxsize=1)
def this_boot() -> Optional[str]:
    """This machine's boot id, read once: it cannot change while this process lives (a watch asked for it on
    every read of the run folder, 20 times a second)."""
    return (read_text("/proc/sys/kernel/random/boot_id") or "").strip() or None


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
    def target(self) -> Target:
        """Where the job runs: the spec's `--target`, as dfdoctor wrote it there (none: this machine), with the
        parts its spelling leaves out (`target_parts`)."""
        return target_of_spec(self.spec)

    @property
    def is_remote(self) -> bool:
        """The job runs on another target (`not target.runs_here`); this folder is the local copy of its record."""
        spelled = self.spec.get("target")
        if spelled is None or isinstance(spelled, str):
            return not _runs_here(spelled)
        return not self.target.runs_here

    def boot_id(self) -> Optional[str]:
        """The current boot id where the job runs (this machine's, or the target's as last fetched)."""
        if self.remote is not None:
            return self.remote.get("boot_id")
        return this_boot()

    @property
    def id(self) -> str:
        """The run's id (its folder's name when the spec lacks one)."""
        return self.spec.get("run_id") or self.dir.name

    def first(self, name: str) -> Optional[dict[str, Any]]:
        """The first event called `name`, or None. Found in an index of the events made at the first question
        and made again once the list is another or grew (a watch asks 18 times a read, 20 reads a second, each a
        walk of every event for the ones not there yet: the exit, the recorder's end)."""
        kept = self.__dict__.get("_firsts")
        if kept is None or kept[0] is not self.events or kept[1] != len(self.events):
            index: dict[str, dict[str, Any]] = {}
            for e in self.events:
                if isinstance(e.get("event"), str):
                    index.setdefault(e["event"], e)
            kept = self.__dict__["_firsts"] = (self.events, len(self.events), index)
        return kept[2].get(name)

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
        # the exit event names the holders a moment before the "handoff" event is written: either one opens it (a
        # look between the two had called the job finished, "ran to completion", while its daemon ran on)
        ex = self.exit or {}
        return (ex.get("exit_code") == 0 and (self.first("handoff") is not None or bool(ex.get("handed_off")))
                and self.first("handoff-ended") is None)

    @property
    def job_pid(self) -> Optional[int]:
        """The job's pid, once it was started."""
        return self.spawned["pid"] if self.spawned else None

    def recorder_alive(self) -> bool:
        """The recorder process of this run still runs (same pid, start time and boot) and is the recorder of
        this very folder (its command line names it): a forged folder naming any pid proves nothing."""
        rec = self.recorder
        if not rec or self.first("recorder-exit"):
            return False
        if self.remote is not None:
            return bool(self.remote.get("recorder_alive"))
        if rec.get("boot_id") and rec["boot_id"] != (this_boot() or ""):
            return False
        return is_recorder_of(rec, str(self.dir))

    def job_alive(self) -> bool:
        """The job's main process still runs (same pid and start time), proved to be this run's job: the nonce of
        the record in its environment, or the session of this folder's live recorder (`procfs.is_job_of`).
        Only a proved job is looked at with py-spy, or named as one to stop."""
        sp = self.spawned
        if sp and self.exit and self.handoff_open:  # the work goes on in what it handed off to
            return self.recorder_alive()
        if not sp or self.exit:
            return False
        if self.remote is not None:
            return bool(self.remote.get("job_alive"))
        if self.recorder and self.recorder.get("boot_id") and self.recorder["boot_id"] != (this_boot() or ""):
            return False
        return is_job_of(sp, self.recorder, str(self.dir))

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
    return Rereader().load(run_dir, remote)


def _json_file(path: Path) -> Optional[Any]:
    """A JSON file's value; None when it is missing or torn."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _copy(value: Any) -> Any:
    """A dict's own copy (its top level); any other value as it is."""
    return dict(value) if isinstance(value, dict) else value


class Rereader:
    """Reads one run folder again and again (a watch reads it 20 times a second, the job mostly silent): a file
    not changed since this reader last read it is not read and parsed again (issue 45: 0.2 ms of each read). The
    recorder only appends to the event logs and replaces the spec and the heartbeat whole (a new file), so a file
    with the same inode, size and times holds what it held; a change between the look and the read makes the next
    look read it again. Each record gets its own copies of the lists and dicts at the top."""

    def __init__(self) -> None:
        self._kept: dict[Path, tuple[tuple[int, ...], Any]] = {}
        # the folder and its four files, as Paths made once: a Path made anew on every read (the folder's, each
        # `/`) and then hashed and turned into a str again was a third of a read's CPU
        self._files: dict[Any, tuple[Path, Path, Path, Path, Path]] = {}

    def _read(self, path: Path, parse: Any) -> Any:
        try:
            st = os.stat(path)
        except OSError:
            self._kept.pop(path, None)
            return parse(path)  # missing: its parser says what a missing file is
        key = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        kept = self._kept.get(path)
        if kept is None or kept[0] != key:
            kept = self._kept[path] = (key, parse(path))
        return kept[1]

    def load(self, run_dir: Path, remote: Optional[dict[str, Any]] = None) -> RunRecord:
        """The run folder as it is now (see `load`)."""
        files = self._files.get(run_dir)
        if files is None:
            folder = Path(run_dir)
            files = self._files[run_dir] = (folder, folder / SPEC, folder / RECORD, folder / LAUNCHER,
                                            folder / HEARTBEAT)
        folder, spec_file, record_file, launcher_file, heartbeat_file = files
        spec = _copy(self._read(spec_file, _json_file))
        run = RunRecord(folder, {} if spec is None else spec,
                        [dict(e) for e in self._read(record_file, events.read)],
                        [dict(e) for e in self._read(launcher_file, events.read)],
                        _copy(self._read(heartbeat_file, _json_file)))
        if run.is_remote:
            run.remote = dict(remote or {})
        return run


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
    head = Path(run_dir) / stream_head(name)
    segs = [Path(run_dir) / stream_tail(name, i) for i in range(TAIL_SEGMENTS)]
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


def still_runs(pid: int, start_ticks: Optional[int]) -> bool:
    """Whether the process the record names is still that process here: same pid, same start time (when it was
    noted) and not a zombie (a zombie holds nothing). A recycled pid is someone else's process, and dfdoctor must
    never tell a user to kill it."""
    if start_ticks is not None and proc_start_time(pid) != start_ticks:
        return False
    import psutil  # start-up: the run folders' reader is imported by every command, this look by few (0.007 CPU-s)
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
