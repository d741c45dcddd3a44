# Shared by slurm.sh and slurm_pair.sh (sourced): starting daemons clean, stopping them, and munged.
# The caller sets CLEAN_ENV (an `env -i ...` array) before sourcing.

source "$(dirname "${BASH_SOURCE[0]}")/daemon.sh"  # start_daemon, detach

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# stop_all PID...: SIGTERM them all at once (each shutdown takes 1-3 s), wait up to 10 s, then SIGKILL the rest.
stop_all() {
  (($#)) || return 0
  kill -CONT "$@" 2>/dev/null || true  # a node stopped by a test must be able to hear the TERM
  kill -TERM "$@" 2>/dev/null || true
  for _ in $(seq 1 100); do
    local left=0 p
    for p in "$@"; do kill -0 "$p" 2>/dev/null && left=1; done
    [ $left = 0 ] && return 0; sleep 0.1
  done
  kill -KILL "$@" 2>/dev/null || true
}

# One munged for every cluster here (they share its key).
start_munge() {
  pgrep -x munged >/dev/null && return 0
  [ -f /etc/munge/munge.key ] || mungekey -c -k /etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
  mkdir -p /run/munge /var/log/munge /var/lib/munge; chown munge:munge /run/munge /var/log/munge /var/lib/munge
  start_daemon runuser -u munge -- /usr/sbin/munged
}
