# Starting the test infrastructure's daemons (sourced by provision.sh and slurm_common.sh; the caller sets
# CLEAN_ENV, an `env -i ...` array). A daemon must carry neither the test session's environment (its marker is how
# the leftover-process guard finds what a test left behind) nor the provisioning lock's descriptor (fd 9: one that
# holds it makes every later provisioning wait 120 s and fail).

# start_daemon CMD...: a daemon that puts itself in the background (sshd, lxc-start -d, atd, slurmd, munged).
start_daemon() { "${CLEAN_ENV[@]}" "$@" 9>&-; }

# detach LOG CMD...: a daemon that stays in the foreground (dockerd, mariadbd), in a session of its own, its
# output in LOG. `setsid -f` forks it off and returns at once: nothing of the caller waits for it. (A function or a
# subshell sent to the background with `&` would be a bash that waits as long as the daemon runs, with the
# caller's environment: CI saw one named "left behind" by the test session that had restarted dockerd.)
detach() { local log=$1; shift; "${CLEAN_ENV[@]}" setsid -f "$@" >"$log" 2>&1 </dev/null 9>&-; }
