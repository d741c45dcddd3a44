#!/usr/bin/env bash
# The action's first step: install dfdoctor (this checkout of it) into a virtual environment of its own, and put
# only the `dfdoctor` command on PATH. The venv's python must not shadow the job's: dfdoctor runs its probes in
# the training interpreter it finds on PATH, which is the one the workflow set up.
set -euo pipefail
root="${GITHUB_ACTION_PATH:?GITHUB_ACTION_PATH must name the folder of action.yml}"
base="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/dfdoctor-action"
python="$(command -v python3 || command -v python)"
"$python" -m venv "$base/venv"
"$base/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$root"
mkdir -p "$base/bin"
ln -sf "$base/venv/bin/dfdoctor" "$base/bin/dfdoctor"
echo "$base/bin" >> "${GITHUB_PATH:?GitHub sets GITHUB_PATH}"
"$base/bin/dfdoctor" --version
