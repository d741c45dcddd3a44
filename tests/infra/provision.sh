#!/usr/bin/env bash
# Real target infrastructure for the target and persistence tests, on 127.0.0.1 only (idempotent, as root):
#   * an OpenSSH server on 127.0.0.1:$PORT: generated host and client keys, key-only root login, UsePAM no;
#     a second client key whose sessions run in a PID namespace that dies with them (a kill-everything session);
#   * a real LXC busybox container named $VMID (no network, unconfined, ptys raised, the host's python3
#     bind-mounted read-only so probes can run in it), plus $VMID_PTY1 with lxc.pty.max = 1 (pty exhaustion);
#   * `pct` on the ssh server's PATH doing what Proxmox's does: `pct exec VMID -- CMD` -> `lxc-attach -n VMID -- CMD`;
#   * atd running (a hand-off that survives a kill-everything session).
# Prints the env file to source (DFDOCTOR_INFRA_*). Nothing here reaches beyond this machine.
set -euo pipefail

DIR=${DFDOCTOR_INFRA_DIR:-/var/lib/dfdoctor-infra}
PORT=${DFDOCTOR_INFRA_SSH_PORT:-47022}
VMID=${DFDOCTOR_INFRA_VMID:-200}
VMID_PTY1=${DFDOCTOR_INFRA_VMID_PTY1:-201}
CLEAN_ENV=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8)
source "$(dirname "$0")/daemon.sh"  # start_daemon, detach: daemons without the session's env or the lock's fd
# Every xdist worker provisions once, while the others' tests already log in, run pct and read the keys: a file
# they use is replaced in one rename, and only when its content changes (CI saw "Permission denied (publickey)"
# while authorized_keys was rewritten in place). put FILE MODE < content; CHANGED lists what changed.
CHANGED=""
put() {
  local tmp
  tmp=$(mktemp "$1.XXXXXX")
  cat > "$tmp"
  chmod "$2" "$tmp"
  if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv -f "$tmp" "$1"; CHANGED="$CHANGED $1"; fi
}

[ "$(id -u)" = 0 ] || { echo "provision: must run as root" >&2; exit 1; }
# Several test sessions may provision at once (engineers, CI shards): one at a time.
mkdir -p "$(dirname "$DIR")"
exec 9>"$DIR.lock"
flock -w 120 9 || { echo "provision: another provisioning holds $DIR.lock" >&2; exit 1; }
for tool in sshd ssh ssh-keygen lxc-create lxc-start lxc-attach busybox unshare; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || { echo "provision: $tool is not installed" >&2; exit 1; }
done
mkdir -p "$DIR/bin" /run/sshd
chmod 700 "$DIR"

# --- ssh: keys and config ----------------------------------------------------------------------------------
[ -f "$DIR/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -C dfdoctor-infra-host -f "$DIR/ssh_host_ed25519_key"
[ -f "$DIR/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C dfdoctor-infra-client -f "$DIR/id_ed25519"
[ -f "$DIR/id_killall" ] || ssh-keygen -q -t ed25519 -N '' -C dfdoctor-infra-killall -f "$DIR/id_killall"

put "$DIR/bin/pct" 755 <<'EOF'
#!/bin/sh
# Proxmox's `pct exec VMID -- CMD` is `exec lxc-attach -n VMID -- CMD` (pve-container src/PVE/CLI/pct.pm):
# no shell in between. Only `exec` is provided here.
if [ "$1" != exec ] || [ -z "$2" ]; then echo "pct (dfdoctor test shim): only 'pct exec VMID -- CMD'" >&2; exit 2; fi
vmid=$2; shift 2
[ "$1" = -- ] && shift
exec lxc-attach -n "$vmid" -- "$@"
EOF
put "$DIR/bin/killall-session" 755 <<'EOF'
#!/bin/sh
# The forced command of the kill-everything key: the session's command runs as the child of a PID namespace's
# init; when the session ends the namespace dies and the kernel kills every process left in it. Only a hand-off
# to a daemon that lives outside (atd, a tmux server started before) survives.
exec unshare --pid --fork --kill-child --mount-proc /bin/sh -c "${SSH_ORIGINAL_COMMAND:-exec /bin/sh -l}"
EOF

{
  echo "$(cat "$DIR/id_ed25519.pub")"
  echo "command=\"$DIR/bin/killall-session\" $(cat "$DIR/id_killall.pub")"
} | put "$DIR/authorized_keys" 600

put "$DIR/sshd_config" 644 <<EOF
Port $PORT
ListenAddress 127.0.0.1
HostKey $DIR/ssh_host_ed25519_key
PidFile $DIR/sshd.pid
AuthorizedKeysFile $DIR/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitTTY yes
X11Forwarding no
AllowTcpForwarding no
MaxSessions 64
MaxStartups 64:30:128
LogLevel ERROR
SetEnv PATH=$DIR/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SHLVL=1
EOF
# SHLVL=1: bash started by sshd sources ~/.bashrc only at shell level 1, and this machine's root .bashrc runs
# `pyenv init`, whose rehash takes a lock file; a test that SIGKILLs a session mid-rehash leaves the lock, and then
# every later login waits 60 s for it (seen: `check` on two ssh targets took 79 s instead of 15). The targets the
# tests log into are plain hosts, not this machine's interactive set-up.

echo "[127.0.0.1]:$PORT $(cut -d' ' -f1,2 "$DIR/ssh_host_ed25519_key.pub")" | put "$DIR/known_hosts" 644
put "$DIR/ssh_config" 644 <<EOF
Host dfdoctor-host
  HostName 127.0.0.1
  Port $PORT
  User root
  IdentityFile $DIR/id_ed25519
Host dfdoctor-killall
  HostName 127.0.0.1
  Port $PORT
  User root
  IdentityFile $DIR/id_killall
Host 127.0.0.1 localhost dfdoctor-host dfdoctor-killall
  IdentitiesOnly yes
  IdentityFile $DIR/id_ed25519
  UserKnownHostsFile $DIR/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
  LogLevel ERROR
EOF

/usr/sbin/sshd -t -f "$DIR/sshd_config"
if ! { [ -f "$DIR/sshd.pid" ] && kill -0 "$(cat "$DIR/sshd.pid")" 2>/dev/null; }; then
  start_daemon /usr/sbin/sshd -f "$DIR/sshd_config"
elif [[ "$CHANGED" == *"$DIR/sshd_config"* ]]; then
  kill -HUP "$(cat "$DIR/sshd.pid")"  # re-read a changed config
fi

# --- LXC containers ----------------------------------------------------------------------------------------
make_container() {  # NAME PTYMAX
  local name=$1 ptys=$2 conf=/var/lib/lxc/$1/config
  if ! lxc-info -n "$name" >/dev/null 2>&1; then
    start_daemon lxc-create -n "$name" -t busybox >/dev/null
  fi
  sed -i -e 's/^lxc.net.0.type = .*/lxc.net.0.type = empty/' -e '/^lxc.net.0.link/d' -e '/^lxc.net.0.flags/d' \
         -e 's/^lxc.apparmor.profile = .*/lxc.apparmor.profile = unconfined/' -e '/allow_nesting/d' \
         -e "s/^lxc.pty.max = .*/lxc.pty.max = $ptys/" "$conf"
  local before
  before=$(md5sum < "$conf")
  grep -q 'usr/bin/python3 none' "$conf" || \
    echo "lxc.mount.entry = $(readlink -f /usr/bin/python3) usr/bin/python3 none ro,bind,create=file 0 0" >> "$conf"
  # A Proxmox container is a Debian or Ubuntu with coreutils and util-linux: give the busybox one the host's
  # nohup, setsid (-f) and tmux (the host's /lib and /usr/lib are bind-mounted already, so they run).
  for tool in nohup setsid tmux; do
    local bin
    bin=$(command -v "$tool" || true)
    [ -n "$bin" ] || continue
    grep -q " usr/local/bin/$tool none" "$conf" || \
      echo "lxc.mount.entry = $(readlink -f "$bin") usr/local/bin/$tool none ro,bind,create=file 0 0" >> "$conf"
  done
  mkdir -p "/var/lib/lxc/$name/rootfs/workspace" "/var/lib/lxc/$name/rootfs/usr/local/bin"
  if [ "$(md5sum < "$conf")" != "$before" ] && [ "$(lxc-info -n "$name" -sH 2>/dev/null)" = RUNNING ]; then
    lxc-stop -n "$name" -k  # mount entries apply at start
  fi
  if [ "$(lxc-info -n "$name" -sH 2>/dev/null)" != RUNNING ]; then
    start_daemon lxc-start -n "$name" -d
    lxc-wait -n "$name" -s RUNNING -t 10
  fi
}
make_container "$VMID" 64
make_container "$VMID_PTY1" 1

# --- atd: a daemon outside any session, for the hand-off test ---------------------------------------------
if command -v atd >/dev/null && ! pgrep -x atd >/dev/null; then
  start_daemon atd || true
fi

# --- docker: a real engine and a container for docker:// (optional: its absence is recorded, not fatal) ----
# The image is imported from an almost empty tree (no registry is reachable); the host's /usr is mounted
# read-only so python3 and the usual tools run inside; /workspace is a host folder the tests write into.
DOCKER_NAME=${DFDOCTOR_INFRA_DOCKER_NAME:-dfdoctor-test}
docker_problem=""
provision_docker() {
  command -v dockerd >/dev/null || { docker_problem="dockerd is not installed (apt install docker.io)"; return; }
  if ! docker info >/dev/null 2>&1 && ! pgrep -x dockerd >/dev/null; then
    # No bridge, no iptables, the vfs driver: nothing here needs a network or an overlay file system. (A dockerd
    # that runs but does not answer yet, busy or starting, is waited for below rather than started twice.)
    detach "$DIR/dockerd.log" dockerd --iptables=false --ip6tables=false --bridge=none --storage-driver=vfs
  fi
  if ! docker info >/dev/null 2>&1; then
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
    docker info >/dev/null 2>&1 || { docker_problem="dockerd did not start: $(tail -c 300 "$DIR/dockerd.log" | tr '\n' ' ')"; return; }
  fi
  if ! docker image inspect dfdoctor-test:base >/dev/null 2>&1; then
    local tree
    tree=$(mktemp -d)
    mkdir -p "$tree"/{usr,tmp,proc,sys,dev,etc,root,workspace}
    for l in bin lib lib64 sbin; do ln -s "usr/$l" "$tree/$l"; done
    echo "root:x:0:0:root:/root:/bin/sh" > "$tree/etc/passwd"
    tar -C "$tree" -c . | docker import - dfdoctor-test:base >/dev/null
    rm -rf "$tree"
  fi
  mkdir -p "$DIR/docker-workspace"
  chmod 1777 "$DIR/docker-workspace"
  if [ "$(docker inspect -f '{{.State.Running}}' "$DOCKER_NAME" 2>/dev/null)" != true ]; then
    docker rm -f "$DOCKER_NAME" >/dev/null 2>&1 || true
    docker run -d --name "$DOCKER_NAME" --network none -v /usr:/usr:ro \
      -v "$DIR/docker-workspace:/workspace" dfdoctor-test:base sleep infinity >/dev/null \
      || { docker_problem="docker run failed"; return; }
  fi
  [ "$(docker exec "$DOCKER_NAME" sh -c 'echo docker-ok' 2>&1)" = docker-ok ] || docker_problem="docker exec failed"
}
provision_docker

put "$DIR/env" 644 <<EOF
DFDOCTOR_INFRA_DOCKER_NAME=$([ -z "$docker_problem" ] && echo "$DOCKER_NAME")
DFDOCTOR_INFRA_DOCKER_PROBLEM=$docker_problem
DFDOCTOR_INFRA_DIR=$DIR
DFDOCTOR_INFRA_SSH_PORT=$PORT
DFDOCTOR_INFRA_VMID=$VMID
DFDOCTOR_INFRA_VMID_PTY1=$VMID_PTY1
DFDOCTOR_SSH_CONFIG=$DIR/ssh_config
EOF

# --- smoke: the whole chain answers -----------------------------------------------------------------------
# The answer is stdout alone: a login shell may say things on stderr (pyenv's "cannot rehash: couldn't acquire
# lock" when other logins rehash at the same time, as parallel test workers' do).
out=$(ssh -F "$DIR/ssh_config" dfdoctor-host "pct exec $VMID -- /bin/sh -c 'echo chain-ok'" 2>"$DIR/smoke.err") || {
  echo "provision: ssh -> pct -> lxc-attach failed: $out $(cat "$DIR/smoke.err")" >&2; exit 1; }
[ "$out" = chain-ok ] || { echo "provision: unexpected answer: $out $(cat "$DIR/smoke.err")" >&2; exit 1; }
echo "$DIR/env"
