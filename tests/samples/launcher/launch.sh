#!/bin/bash
# Starts the drafter in the background; the log goes next to the script.
set -e
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
mkdir -p logs
nohup python3 train.py --drafters 4 "$@" > logs/train.log 2>&1 &
echo "started"
