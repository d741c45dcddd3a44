#!/usr/bin/env bash
# Launch the bundled trainer: from the repository root, unbuffered, its output appended to $TRAINER_LOG.
#   trainer/launch.sh [trainer options]        e.g. trainer/launch.sh --preset gpu
# PYTHON picks the interpreter (default python3); TRAINER_LOG the log (default runs/trainer.log).
# Under `dfdoctor launch --no-redirect --log "$TRAINER_LOG" -- trainer/launch.sh ...` dfdoctor watches that log.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
LOG=${TRAINER_LOG:-runs/trainer.log}
mkdir -p "$(dirname "$LOG")"
exec "$PYTHON" -u -m dfdoctor.trainer "$@" >> "$LOG" 2>&1
