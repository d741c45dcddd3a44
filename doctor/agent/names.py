"""The names of the files in a run folder: one list for the host, which reads them, and the recorder and target
agent, which write them where the job runs.

Standard library only, imports nothing of dfdoctor's and keeps Python 3.6 syntax (no annotations), so the code
that travels to a target can load this file as it is.
"""

SPEC = "spec.json"  # what was launched: argv, cwd, log, python; written before the recorder starts
RECORD = "record.jsonl"  # the recorder's append-only record: one JSON event per line
LAUNCHER = "launcher.jsonl"  # dfdoctor's own notes about the run (launched, detached), masked
HEARTBEAT = "heartbeat"  # the recorder's latest counts, replaced atomically
RECORDER_OUT = "recorder.out"  # the recorder's own stdout and stderr
MASKS = "masks.json"  # the launch's secrets as keyed fingerprints (redact.SecretPrints), never the values
REPORT_JSON = "report.json"
REPORT_HTML = "report.html"
PRE_CHECKS = "pre-checks.json"  # the launch's pre-launch findings, which `status` connects its verdict to
STREAMS = ("stdout", "stderr")
TAIL_SEGMENTS = 2  # a capped stream copy: NAME.log (its head), then NAME.tail.0 and NAME.tail.1 (its newest bytes)

# The marker file that says "dfdoctor made this folder for a run": a name and a content a user's own folder does
# not have by chance.
MARKER = ".dfdoctor-run"
MARKER_TEXT = "dfdoctor run folder, id "
# On a target: the login shell's umask, written by ship.sh before it takes 077 for the run folder; the recorder
# gives it back to the job and its --log.
JOB_UMASK = "job.umask"

# The environment variable the recorder gives the job: "RUN_ID:NONCE", a nonce drawn afresh for each run and kept in
# the record's "spawned" event. Every process of the job inherits it (ranks in sessions of their own, a daemon a
# launcher left behind), so `dfdoctor stop` can prove a process is the run's before it signals it: a pid named in a
# run folder proves nothing, the marker in the process's own environment does.
RUN_ENV = "DFDOCTOR_RUN"

# The files of a remote run folder that are copied into its local copy; the local spec.json (which names the
# target) and launcher.jsonl (dfdoctor's own notes) are this machine's.
MIRRORED = (RECORD, HEARTBEAT, RECORDER_OUT, "stdout.log", "stderr.log")


def stream_head(name):
    """The file holding the first bytes of stream `name` (stdout or stderr)."""
    return name + ".log"


def stream_tail(name, index):
    """The file holding tail segment `index` (0 or 1) of stream `name`."""
    return "%s.tail.%d" % (name, index)
