"""The sessions on a target behind `launch --target` and `status` (`local.py` does the same here).

`ship_recorder` sends the flight recorder over stdin into a run folder on the target and starts it detached there,
with the strategy `persistence.session` found best for the target or the recorder's own detach; `fetch` reads the
run folder back in one session (`target_agent.py`, shipped the same way, answers there).
"""

from __future__ import annotations

import base64
import json
import re
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from dfdoctor.command import run_command
from dfdoctor.launch import marker as rundir_marker
from dfdoctor.targets import parse_target, transport
from dfdoctor.targets.strategies import BY_NAME, best_for


def _num(v: Optional[str]) -> Optional[int]:
    """An integer the shell printed, or None."""
    return int(v) if v and re.fullmatch(r"-?[0-9]+", v) else None


# ---- the flight recorder on a target (`dfdoctor launch --target`) ---------------------------------------
RECORDER = Path(__file__).resolve().with_name("recorder.py")
REDACT = Path(__file__).resolve().parent.parent / "redact.py"
DEFAULT_STRATEGY = "dfdoctor"  # the recorder's own --detach: SIGHUP ignored before fork, setsid, fds to files
RUN_DIR_MARK = "@@dfdoctor-run-dir@@"
PID_MARK = "@@dfdoctor-recorder-pid@@"

PY_MARK = "@@dfdoctor-python@@"
END_MARK = "@@dfdoctor-end@@"

# Runs in the target's shell; stdin carries recorder.py. The run folder goes under the job's cwd when that
# exists and is writable (so the record sits beside the job), else in a fresh `mktemp -d` folder; a missing cwd
# is left missing, so the recorder reports it instead of us creating it. With $7 = 1 it only chooses and creates the folder
# (a strategy's line must name it, so it is built here, between two sessions).
SHIP = """py=$1; cwd=$2; id=$3; d=$4; spec=$5; line=$6
command -v "$py" >/dev/null 2>&1 || py=python3
umask 077
if [ -z "$d" ]; then
  # a folder of its own per run: under the job's cwd, else a fresh `mktemp -d` (never a fixed shared path
  # another user could create first and fill with their own recorder.py)
  root=$cwd/.dfdoctor/runs
  if [ -d "$cwd" ] && mkdir -p "$root" 2>/dev/null && mkdir "$root/$id" 2>/dev/null; then d=$root/$id
  else d=$(mktemp -d "${TMPDIR:-/tmp}/dfdoctor-run.XXXXXXXX") || exit 97; root=; fi
  # keep the newest $8 run folders there; an older one goes only once its recorder wrote its last word
  n=0
  [ -n "$root" ] && for r in $(ls -1 "$root" 2>/dev/null | grep -E '^[0-9]{8}-[0-9]{6}-[0-9a-f]+$' | sort -r); do
    n=$((n+1)); [ "$n" -le "${8:-20}" ] && continue
    grep -q '"event": "recorder-exit"' "$root/$r/record.jsonl" 2>/dev/null && rm -rf "$root/$r"
  done
else
  mkdir -p "$d" || exit 97
fi
# the folder must be new or empty, or this very run's (a second session of the same launch)
if [ "$(cat "$d/MARKER_NAME" 2>/dev/null)" != "MARKER_TEXT$id" ] && [ -n "$(ls -A "$d" 2>/dev/null)" ]; then
  printf '%s is not empty: choose a new or empty --run-dir\\n' "$d" >&2; exit 98
fi
[ -e "$d/record.jsonl" ] && { printf '%s already holds a run (record.jsonl)\\n' "$d" >&2; exit 98; }
printf '%s%s' "MARKER_TEXT" "$id" > "$d/MARKER_NAME" || exit 97
# paths go out with printf '%s' (dash's echo rewrites backslashes), each closed by END_MARK: a path may hold a newline
printf 'RUN_DIR_MARK%sEND_MARK\\n' "$d"; printf 'PY_MARK%sEND_MARK\\n' "$py"
[ "$7" = 1 ] && exit 0
cat > "$d/recorder.py" || exit 97
(umask 077 && printf '%s' "$spec" > "$d/spec.in") || exit 97
if [ -z "$line" ]; then
  printf 'PID_MARK'; exec "$py" "$d/recorder.py" --detach "$d" </dev/null
fi
eval "$line"
""".replace("RUN_DIR_MARK", RUN_DIR_MARK).replace("PID_MARK", PID_MARK).replace("PY_MARK", PY_MARK) \
    .replace("END_MARK", END_MARK).replace("MARKER_NAME", rundir_marker.NAME).replace("MARKER_TEXT", rundir_marker.TEXT)


def recorder_source() -> bytes:
    """recorder.py as one file for a target: with dfdoctor's masking rules (redact.py) embedded, so the record
    there is masked by the very rules of every output here."""
    text = RECORDER.read_text()
    marker = "REDACT_SOURCE = None"
    assert text.count(marker) == 1, "recorder.py must hold exactly one REDACT_SOURCE line"
    return text.replace(marker, "REDACT_SOURCE = " + repr(REDACT.read_text()), 1).encode()


@dataclass
class Shipped:
    """A recorder started on a target: its run folder there, its pid (when it said), how it was detached."""

    target: str
    run_dir: Optional[str]
    python: str
    strategy: str
    line: str
    pid: Optional[int] = None
    error: Optional[str] = None
    session_s: float = 0.0
    fallback_from: Optional[str] = None  # why the training interpreter could not run the recorder
    unreachable: bool = False  # the error is the connection's own (ssh exit 255, lxc-attach could not attach)


def ship_recorder(target_spec: str, *, spec: dict, run_id: str, cwd: str, python: str = "python3",
                  strategy: Optional[str] = None, run_dir: Optional[str] = None, keep: int = 20,
                  timeout: float = 30.0) -> Shipped:
    """Send recorder.py over stdin into a run folder on the target and start it detached there, with the
    strategy asked for (`auto`: the one `persistence.session` remembered, else the recorder's own detach)."""
    name = strategy if strategy and strategy != "auto" else (best_for(target_spec) or DEFAULT_STRATEGY)
    began = time.monotonic()
    shipped = Shipped(target_spec, run_dir, python, name, "")
    line = ""
    if name != DEFAULT_STRATEGY:
        # the strategy's line names the run folder and the interpreter: learn both there first
        _ship_session(target_spec, [python, cwd, run_id, run_dir or "", "", "", "1", str(keep)], None, timeout, shipped)
        if shipped.error:
            return shipped
        line = BY_NAME[name].line([shipped.python, f"{shipped.run_dir}/recorder.py", shipped.run_dir or ""],
                                  f"{shipped.run_dir}/recorder.out", name=run_id.replace("-", ""),
                                  python=shipped.python)
        shipped.line = line
    args = [cwd, run_id, shipped.run_dir or "", json.dumps(spec), line, "0", str(keep)]
    _ship_session(target_spec, [shipped.python, *args], recorder_source(), timeout, shipped)
    if name == DEFAULT_STRATEGY and shipped.pid is None and shipped.run_dir and shipped.python != "python3" and \
            not shipped.unreachable:
        # the training interpreter cannot run even the standard-library recorder (too old, broken): the
        # target's python3 can. SHIP refuses a folder that holds a record already, so never two recorders.
        failed = shipped.error
        shipped.error, shipped.python = None, "python3"
        _ship_session(target_spec, ["python3", cwd, run_id, shipped.run_dir, *args[3:]], recorder_source(),
                      timeout, shipped)
        shipped.fallback_from = failed or "no pid"
    if not shipped.error and name == DEFAULT_STRATEGY and shipped.pid is None:
        shipped.error = "the recorder did not say its pid: it did not detach"
    shipped.session_s = time.monotonic() - began
    return shipped


def _ship_session(target_spec: str, args: list[str], stdin: Optional[bytes], timeout: float,
                  shipped: Shipped) -> None:
    """One run of SHIP on the target; what it printed (folder, python, pid) or its error goes into `shipped`."""

    target = parse_target(target_spec)
    out = run_command(transport.wrap(target, ["sh", "-c", SHIP, "sh", *args]), timeout=timeout, stdin_data=stdin,
                      stack_signal=None)
    for mark, value in re.findall(f"({re.escape(RUN_DIR_MARK)}|{re.escape(PY_MARK)})(.*?){re.escape(END_MARK)}",
                                  out.stdout, re.S):
        if mark == RUN_DIR_MARK:
            shipped.run_dir = value
        else:
            shipped.python = value
    for ln in out.stdout.splitlines():
        if ln.startswith(PID_MARK):
            shipped.pid = _num(ln[len(PID_MARK):].strip())
    err = transport.transport_error(target, out.returncode, out.stderr)
    shipped.unreachable = bool(err or out.spawn_error)
    if err or out.timed_out or out.spawn_error or out.returncode not in (0, None) or not shipped.run_dir:
        shipped.error = err or out.spawn_error or (f"the starting session did not return within {timeout:.0f} s"
                                                   if out.timed_out else None) or \
            out.stderr.strip()[-400:] or f"the starting session exited {out.returncode} without starting the recorder"


# Runs in the target's python: stdin's one line is [[module name, source], ...]; each module but the last becomes
# importable under its dfdoctor name, and the last runs as __main__ with the command line's arguments.
LOADER = r'''
import base64, json, sys, types, zlib
mods = json.loads(zlib.decompress(base64.b64decode(sys.stdin.readline())).decode())
for name, src in mods[:-1]:
    parts = name.split(".")
    for i in range(1, len(parts)):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    sys.modules[name] = mod = types.ModuleType(name)
    exec(compile(src, name, "exec"), mod.__dict__)
exec(compile(mods[-1][1], mods[-1][0], "exec"), {"__name__": "__main__"})
'''
AGENT = Path(__file__).resolve().with_name("target_agent.py")
AGENT_WAITS = Path(__file__).resolve().with_name("agent_waits.py")  # the descriptors and socket peers it reads
AGENT_RANKS = Path(__file__).resolve().with_name("agent_ranks.py")  # torchrun's ranks, for the settle check


def agent_helpers() -> list[list[str]]:
    """The modules target_agent.py imports besides the recorder, as [name, source] for LOADER."""
    return [["dfdoctor.launch.agent_waits", AGENT_WAITS.read_text()],
            ["dfdoctor.launch.agent_ranks", AGENT_RANKS.read_text()]]


def agent_input() -> bytes:
    """What goes down the target's stdin for `target_agent`: the recorder (whose fd reading it uses), then it."""
    mods = [["dfdoctor.launch.recorder", RECORDER.read_text()], *agent_helpers(),
            ["dfdoctor.launch.target_agent", AGENT.read_text()]]
    return base64.b64encode(zlib.compress(json.dumps(mods).encode(), 9)) + b"\n"


def fetch(target_spec: str, run_dir: str, *, python: str = "python3", live: bool = False, full: bool = False,
          timeout: float = 20.0, ranks: bool = False) -> dict:
    """One session on the target: the run folder's files and whether its recorder and job still live.

    The answer is a dict (`files`, `recorder_alive`, `job_alive`, `boot_id`, with `live` facts of the job
    when asked and it runs); on failure `{"error": "..."}` in ssh's or the shell's own words.
    """

    target = parse_target(target_spec)
    argv = transport.wrap(target, [python, "-c", LOADER, run_dir, "1" if live else "0", "1" if full else "0"]
                          + (["1"] if ranks else []))
    out = run_command(argv, timeout=timeout + (25 if live else 0), stdin_data=agent_input(),
                      stack_signal=None)  # py-spy: 5 s a process
    err = transport.transport_error(target, out.returncode, out.stderr)
    _, mark, answer = out.stdout.rpartition("@@dfdoctor-answer@@")
    if err or not mark:
        return {"error": err or out.spawn_error or out.stderr.strip()[-400:] or
                (f"no answer within {timeout:.0f} s" if out.timed_out else f"no answer (status {out.returncode})")}
    try:
        return json.loads(answer)
    except ValueError:
        return {"error": "a malformed answer: " + answer[:200]}
