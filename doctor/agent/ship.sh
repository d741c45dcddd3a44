# dfdoctor's shipping shell (dfdoctor.agent.ship.ship_script): runs in the target's shell; stdin carries the agent's
# zip. Arguments: python cwd run_id run_dir spec line only_choose keep. The run folder goes under the job's cwd when
# that exists and is writable (so the record sits beside the job), else in a fresh `mktemp -d` folder; a missing
# cwd is left missing, so the recorder reports it instead of us creating it. With $7 = 1 it only chooses and
# creates the folder (a strategy's line must name it, so it is built here, between two sessions). The words in
# capitals (RUN_DIR_MARK, MARKER_NAME, ...) are filled in by ship_script.
py=$1; cwd=$2; id=$3; d=$4; spec=$5; line=$6
command -v "$py" >/dev/null 2>&1 || py=python3
# the login shell's umask, for the job and its --log (the recorder reads JOB_UMASK_NAME): 077 is for our folder only
job_umask=$(umask)
umask 077
if [ -z "$d" ]; then
  # a folder of its own per run: under the job's cwd, else a fresh `mktemp -d` (never a fixed shared path
  # another user could create first and fill with their own agent.pyz)
  root=$cwd/.dfdoctor/runs
  if [ -d "$cwd" ] && mkdir -p "$root" 2>/dev/null && mkdir "$root/$id" 2>/dev/null; then d=$root/$id
  else d=$(mktemp -d "${TMPDIR:-/tmp}/dfdoctor-run.XXXXXXXX") || exit 97; root=; fi
  # as pytest does for its cache: `git add -A` on the target must not stage run folders (made once, never rewritten)
  # (set -C: O_EXCL, so neither an existing file nor a planted symlink is written through)
  [ -n "$root" ] && (set -C; umask 022; printf '%s\n*\n' "# Created by dfdoctor: run folders hold the output of jobs \
and are not for version control." > "$cwd/.dfdoctor/.gitignore") 2>/dev/null
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
  printf '%s is not empty: choose a new or empty --run-dir\n' "$d" >&2; exit 98
fi
[ -e "$d/record.jsonl" ] && { printf '%s already holds a run (record.jsonl)\n' "$d" >&2; exit 98; }
printf '%s%s' "MARKER_TEXT" "$id" > "$d/MARKER_NAME" || exit 97
printf '%s' "$job_umask" > "$d/JOB_UMASK_NAME" || exit 97
# paths go out with printf '%s' (dash's echo rewrites backslashes), each closed by END_MARK: a path may hold a newline
printf 'RUN_DIR_MARK%sEND_MARK\n' "$d"; printf 'PY_MARK%sEND_MARK\n' "$py"
[ "$7" = 1 ] && exit 0
cat > "$d/agent.pyz" || exit 97
(umask 077 && printf '%s' "$spec" > "$d/spec.in") || exit 97
if [ -z "$line" ]; then
  # -S: the recorder needs the standard library alone (as here_argv starts it locally): no site-packages' .pth files
  printf 'PID_MARK'; exec "$py" -S "$d/agent.pyz" recorder --detach "$d" </dev/null
fi
eval "$line"
