"""log.writable: can the job's log file be created and appended to, with room to grow?

The facts are read where the job runs (this machine or the --target) by `checks/probes/log_probe.py`.

It never truncates, moves or deletes an existing log: an existing log is opened for append and closed
untouched; a missing one is probed with a temporary file beside it, and only that file is removed.
"""

from __future__ import annotations

import importlib
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from dfdoctor import STATIC, causes, check, error, fail, ok, warn
from dfdoctor.launchline.commandline import spec_for
from dfdoctor.probe import run_probe, unreached
from dfdoctor.redact import name_looks_secret, value_is_maskable

if TYPE_CHECKING:
    from dfdoctor.named_files import Named

# Below these the log (and checkpoints beside it) will soon stop growing: fail under the first, warn under the
# second. Per-project values: [tool.dfdoctor.checks."log.writable"] min_free_mb / warn_free_mb / min_free_inodes.
MIN_FREE_MB = 100
WARN_FREE_MB = 1024
MIN_FREE_INODES = 1000

_NO_SPACE = {"ENOSPC", "EDQUOT"}


def _no_log(ctx) -> Optional[str]:
    if ctx.log is None:
        return "no --log given, so there is no log file to check"
    # asked in dfdoctor's own process before the worker forks: named_files is loaded there once, for the worker
    # (log_writable) and for a launch's own refusal after the checks (launch/recorded.py), not once in each
    importlib.import_module("dfdoctor.named_files")
    return None


@check("log.writable", title="The log file can be written", phases=("pre", "post"), timeout=10, not_applicable=_no_log)
def log_writable(ctx):
    """Probe the log's folder, the log itself, free space and buffering, where the job runs."""
    # imported where a --log is given (_no_log): every `check` imports this module, and without a --log the check
    # does not run (6 M of a `check`'s 600 M instructions, callgrind, round 25)
    from dfdoctor.named_files import named_by, suggested_log
    log = ctx.abspath(ctx.log)
    named = named_by(ctx)
    outcome = run_probe(ctx, "log_probe.py", [str(log)], timeout=min(ctx.timeout or 10, 10), site=False,
                        request={"named": [n.path for n in named]} if named else None)
    f = outcome.payload
    unreachable = unreached(ctx, outcome)
    if unreachable:
        yield unreachable
        return
    if f is None:
        why = outcome.extra.get("transport_error") or outcome.spawn_error or outcome.stderr.strip()[-300:]
        yield error(f"could not examine {log} where the job runs: {why or 'the probe gave no answer'}")
        return
    folder = Path(f["folder"])
    where = _where(ctx)
    if not f["folder_exists"]:
        yield fail(f"the log's folder {folder} does not exist{where}, so the log cannot be opened: a shell's `> LOG` "
                   "fails before Python starts, and `dfdoctor launch` would have nowhere to write it",
                   causes.LOG_DIR_MISSING, evidence=(f"nearest existing folder: {f['nearest_existing']}",),
                   fix=f"mkdir -p {_q(folder)}")
        return
    if not f["folder_is_dir"]:
        yield fail(f"{folder} is not a folder, so {log.name} cannot be created in it", causes.LOG_NOT_WRITABLE,
                   fix=f"choose a --log path inside a folder; {folder} is a file")
        return
    if f["log_is_dir"]:
        yield fail(f"{log} is a folder, so the log file cannot be created there", causes.LOG_NOT_WRITABLE,
                   fix=f"point --log at a file inside it, e.g. {log / 'train.log'}")
        return
    if f.get("log_kind"):
        yield _not_a_file(log, f["log_kind"], f.get("fifo_reader"))
        return
    same = [named[i] for i in f.get("same_as") or () if i < len(named)]
    other_purpose = [n for n in same if n.role != "log-option"]
    if other_purpose:
        yield _named_for_another_purpose(ctx, other_purpose[0], suggested_log(named, str(ctx.log)))
        return
    for n in same:
        yield warn(f"{ctx.log} is also the job's own log ({n.word}): two writers share one file, and dfdoctor's "
                   "capture of the job's output and the job's own log lines interleave in it",
                   fix=f"point --log at another file, e.g. {suggested_log(named, str(ctx.log))}, or let the job "
                       "write its log alone (not tried)")
    if f.get("write_error"):
        yield _write_failure(log, f["write_error"])
        return
    yield from _free_space(ctx, folder, f)
    yield from _buffering(ctx, log)
    yield from _secrets_in_log(ctx, log)


# How much of a log is searched for secret values: the whole of a log up to this size, else its last part (where
# a job that prints its environment at start-up has usually been rotated past; the report says how much).
SECRET_SCAN_BYTES = 64 << 20


def secret_names_in(path: Path, secrets: dict[str, str], limit: int = SECRET_SCAN_BYTES) -> tuple[list[str], int]:
    """The names of `secrets` whose value appears in the file (its last `limit` bytes), and the bytes searched.
    The file is only read."""
    wanted = {name: value.strip().encode() for name, value in secrets.items()}
    longest = max(len(v) for v in wanted.values())
    found: set[str] = set()
    searched = 0
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(max(0, size - limit))
        tail = b""
        while len(found) < len(wanted):
            chunk = f.read(1 << 20)
            if not chunk:
                break
            searched += len(chunk)
            window = tail + chunk  # a value cut by a chunk's edge is whole in the next window
            found |= {name for name, value in wanted.items() if name not in found and value in window}
            tail = window[-(longest - 1):] if longest > 1 else b""
    return sorted(found), searched


def _secrets_in_log(ctx, log: Path):
    """A log that holds the value of a secret variable of the job's environment (the job printed HF_TOKEN):
    dfdoctor's reports mask it, the log itself does not, and logs are shared. Said by the variable's name, never
    its value. On this machine only: the values are not sent anywhere to search a target's log."""
    if not ctx.target.runs_here:
        return
    secrets = {k: v for k, v in (ctx.env or {}).items()
               if isinstance(v, str) and name_looks_secret(k) and value_is_maskable(v)}
    try:
        if not secrets or not log.is_file():
            return
        names, searched = secret_names_in(log, secrets)
    except OSError:
        return  # a log that cannot be read here: the checks above said what matters
    if names:
        yield warn(f"the log {log} contains the value of secret variable{'s' if len(names) > 1 else ''} "
                   f"{', '.join(names)} (dfdoctor's reports mask it; the log itself is kept as the job wrote it)",
                   evidence=(f"searched the last {searched / (1 << 20):.1f} MiB of the log for the values of "
                             f"{len(secrets)} secret-looking variable(s)",),
                   fix="Stop the job from printing it (a logged config or environment dump), remove it from the log "
                       "before sharing it, and rotate the secret if the log has left this machine.")


def _named_for_another_purpose(ctx, n: Named, suggested: str):
    """The log is a file the user named for another purpose: appending the job's output would change it (a script
    ending with the job's `hi` fails at its next run). Never written into; said as log-not-writable."""
    log = ctx.abspath(ctx.log)
    also = "" if Path(n.path) == log else f" (as {n.path})"
    return fail(f"{ctx.log} {n.what()}: the job's output would be appended to it", causes.LOG_NOT_WRITABLE,
                evidence=(f"--log {ctx.log} is the same file{also}{_where(ctx)}: dfdoctor never writes into a "
                          "file the command names for another purpose, even with --force",),
                data={"log_is_input": {"path": n.path, "role": n.role, "word": n.word}},
                fix=f"point --log at a file of its own, e.g. {suggested} (mkdir -p logs first; not tried)")


def _not_a_file(log: Path, kind: str, reader: bool | None):
    """A log path that is a FIFO, a device or a socket: said, never opened (a FIFO without a reader blocks the
    opener for ever, and a device may act on being opened)."""
    if kind == "fifo" and reader:
        return warn(f"{log} is a named pipe (FIFO) that something reads now: the job's output goes to that reader, "
                    "no file keeps it, and the job stalls whenever the reader does", causes.LOG_NOT_WRITABLE,
                    fix="point --log at a regular file (the reader can `tail -F` it)")
    if kind == "fifo":
        return fail(f"{log} is a named pipe (FIFO) that nothing reads: opening it to write blocks until a reader "
                    "comes, so the job would never start", causes.LOG_NOT_WRITABLE,
                    fix=f"point --log at a regular file, or start the reader first (cat {_q(log)})")
    if kind == "chardev":
        return warn(f"{log} is a character device, not a file: whatever the job writes there is not kept to read "
                    "later", causes.LOG_NOT_WRITABLE, fix="point --log at a regular file")
    what = {"blockdev": "a block device (a disk): writing a log onto it would overwrite its data",
            "socket": "a socket: a file cannot be opened there"}.get(kind, f"not a regular file ({kind})")
    return fail(f"{log} is {what}", causes.LOG_NOT_WRITABLE, fix="point --log at a regular file")


def _write_failure(log: Path, err: dict):
    if err["errno"] in _NO_SPACE:
        return fail(f"no space left where the log goes ({log.parent}): {err['strerror']}", causes.DISK_FULL,
                    fix=f"free space on the file system of {log.parent}, or log elsewhere")
    why = {"EROFS": "the file system is read-only", "EACCES": "permission denied",
           "EPERM": "operation not permitted",
           "ENAMETOOLONG": "its name is longer than the file system allows"}.get(err["errno"], err["strerror"])
    return fail(f"cannot write the log {log}: {why}", causes.LOG_NOT_WRITABLE, evidence=(err["text"],),
                fix=f"log to a writable place, or fix the folder's permissions (ls -ld {_q(log.parent)})")


def _free_space(ctx, folder: Path, f: dict):
    free_mb, free_inodes = f["free_mb"], f["free_inodes"]
    min_mb = float(ctx.option("log.writable", "min_free_mb", MIN_FREE_MB))
    warn_mb = float(ctx.option("log.writable", "warn_free_mb", WARN_FREE_MB))
    min_inodes = int(ctx.option("log.writable", "min_free_inodes", MIN_FREE_INODES))
    facts = {"free_mb": free_mb, "free_inodes": free_inodes, "folder": str(folder)}
    if f["total_inodes"] and free_inodes < min_inodes:
        yield fail(f"only {free_inodes} inodes are free where the log goes ({folder})", causes.DISK_FULL,
                   fix="delete small files (old checkpoints, caches) on that file system, or log elsewhere",
                   data={"disk": facts})
    elif free_mb < min_mb:
        yield fail(f"only {free_mb:.0f} MiB free where the log goes ({folder}); dfdoctor wants at least "
                   f"{min_mb:.0f} MiB", causes.DISK_FULL, data={"disk": facts},
                   fix="free space on that file system, or log elsewhere")
    elif free_mb < warn_mb:
        yield warn(f"{free_mb:.0f} MiB free where the log goes ({folder}); a long run may fill it",
                   causes.DISK_FULL, data={"disk": facts}, fix="free space before a long run")
    else:
        yield ok(f"{ctx.log} can be written{_where(ctx)} ({free_mb / 1024:.1f} GiB free)", data={"disk": facts})


def _buffering(ctx, log: Path):
    """Python block-buffers a redirected stdout: the log stays empty for minutes while the job works."""
    if ctx.no_redirect or not ctx.command or ctx.phase != "pre":
        return  # after the launch, the launch's own diagnosis says whether the log really stayed empty
    try:
        spec = spec_for(ctx)
    except Exception:
        return
    if spec.runner not in ("python", "torchrun", "accelerate", "launcher"):
        return
    if spec.unbuffered or ctx.env.get("PYTHONUNBUFFERED"):
        return
    yield warn("Python will block-buffer its output into the log: it can stay empty for minutes while the job "
               "works", causes.OUTPUT_BUFFERED,
               evidence=("the command has no -u and PYTHONUNBUFFERED is not set",),
               fix="add -u after python (python -u train.py) or export PYTHONUNBUFFERED=1", basis=STATIC)


def _q(p: Path) -> str:
    return shlex.quote(str(p))


def _where(ctx) -> str:
    """Where the probe looked, in words (` in container 200 on root@host (ssh, then pct exec)`), so that this row
    and launch.path's, which may look on another hop, each say where; nothing on this machine."""
    return "" if ctx.target.runs_here else f" in {ctx.target.describe()}"
