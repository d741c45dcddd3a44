#!/usr/bin/env bash
# The action's check step: `dfdoctor check` with the inputs action.yml passes as INPUT_* variables. Annotations go
# to the log (GitHub reads them there), the summary to $GITHUB_STEP_SUMMARY, the reports into INPUT_OUTPUT_DIR;
# the verdict and exit code become step outputs. It always exits 0 so the report is uploaded first; the action's
# last step fails the job on the exit code.
set -uo pipefail
out="${INPUT_OUTPUT_DIR:-dfdoctor-report}"
mkdir -p "$out"
# Words are split the way a POSIX shell would, without running anything that is in them.
split() { python3 -c 'import os, shlex, sys; sys.stdout.write("".join(w + "\0" for w in shlex.split(os.environ.get(sys.argv[1], ""))))' "$1"; }
command_words=()
while IFS= read -r -d '' w; do command_words+=("$w"); done < <(split INPUT_COMMAND)
if [ "${#command_words[@]}" -eq 0 ]; then
  echo "::error title=dfdoctor action::the command input is empty (say what the job runs, e.g. python train.py)"
  echo "exit-code=2" >> "${GITHUB_OUTPUT:-/dev/null}"
  exit 0
fi
args=(check --fail-on "${INPUT_FAIL_ON:-error}")
[ -n "${INPUT_LOG:-}" ] && args+=(--log "$INPUT_LOG")
while IFS= read -r spec; do
  spec="${spec%%#*}"; spec="$(printf '%s' "$spec" | tr -d '[:space:]')"
  [ -n "$spec" ] && args+=(--target "$spec")
done <<< "${INPUT_TARGET:-}"
while IFS= read -r -d '' w; do args+=("$w"); done < <(split INPUT_ARGS)
# Each report is named by its format; json always (the step's outputs come from it). github goes last, with no
# file: dfdoctor pairs an output whose extension names no requested format (gitlab's .json) with the first free
# format, so the terminal keeps github.
formats=" json ${INPUT_FORMATS:-html} "
for f in json html junit sarif gitlab text; do
  case "$formats" in *" $f "*) ;; *) continue ;; esac
  case "$f" in
    json) file=dfdoctor.json ;; html) file=dfdoctor.html ;; junit) file=dfdoctor-junit.xml ;;
    sarif) file=dfdoctor.sarif ;; gitlab) file=gl-code-quality-report.json ;; text) file=dfdoctor.txt ;;
  esac
  args+=(--format "$f" --output "$out/$file")
done
# read -a splits on whitespace and, unlike an unquoted $formats, never expands `*` into the checkout's file names
read -r -a format_words <<< "$formats"
for f in "${format_words[@]}"; do
  case " json html junit sarif gitlab text github " in *" $f "*) ;; *)
    f="${f//%/%25}"
    echo "::error title=dfdoctor action::unknown format '$f' (html json junit sarif gitlab text)"
    echo "exit-code=2" >> "${GITHUB_OUTPUT:-/dev/null}"; exit 0 ;;
  esac
done
args+=(--format github)
dfdoctor "${args[@]}" -- "${command_words[@]}"
rc=$?
verdict=$(python3 -c 'import json, sys; v = json.load(open(sys.argv[1]))["verdict"]; print(v["state"], v.get("cause") or "")' "$out/dfdoctor.json" 2>/dev/null || echo "unknown")
{
  echo "exit-code=$rc"
  echo "verdict=${verdict%% *}"
  echo "cause=$(printf '%s' "$verdict" | cut -s -d' ' -f2)"
  echo "report-dir=$out"
} >> "${GITHUB_OUTPUT:-/dev/null}"
exit 0
