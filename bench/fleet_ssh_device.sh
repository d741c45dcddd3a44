#!/bin/bash
# The 16-target goal measured where the targets' side does not share two cores with dfdoctor: on the device
# machine (16 cores), an sshd of our own on 127.0.0.1:47122 reached under 16 host aliases (16 ssh masters, 16
# rows, as 16 machines would be), against one alias alone. Same light checks as bench/fleet_speed.py.
# Usage there:  OUT=/some/dir bash bench/fleet_ssh_device.sh      (needs sshd and ssh; root)
set -u
OUT=${OUT:?set OUT to a folder}
exec > >(tee -a "$OUT/fleet_ssh_device_log.txt") 2>&1
# A machine without OpenSSH can be lent this machine's binaries: .devbin/{real,lib,bin} (git-ignored; made by
# bench/devbin.sh), the libraries only for ssh's own processes, never for the pythons it starts.
if [ -x .devbin/real/sshd ]; then
  export PATH=$PWD/.devbin/bin:$PATH
  SSHD_RUN=(env "LD_LIBRARY_PATH=$PWD/.devbin/lib" "$PWD/.devbin/real/sshd")
  id sshd >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin sshd 2>/dev/null || \
    echo "sshd:x:74:74:privsep:/run/sshd:/usr/sbin/nologin" >> /etc/passwd
else
  SSHD_RUN=("$(command -v sshd || echo /usr/sbin/sshd)")
fi
[ -x "${SSHD_RUN[-1]}" ] && command -v ssh >/dev/null || { echo "no sshd/ssh on this machine"; exit 3; }
echo "== machine: $(nproc) cores, $(python3 --version), $(ldd --version | head -1)"; date -u
python3 -m pip install -q --no-deps --no-build-isolation -e . >/tmp/pip.log 2>&1 || tail -3 /tmp/pip.log
D=$(mktemp -d /tmp/dfd-fleet.XXXX); chmod 755 "$D"
ssh-keygen -q -t ed25519 -N '' -f "$D/host_key"; ssh-keygen -q -t ed25519 -N '' -f "$D/id"
cp "$D/id.pub" "$D/authorized_keys"  # a key file of its own: nothing is added to ~/.ssh
mkdir -p /run/sshd
cat > "$D/sshd_config" <<CFG
Port 47122
ListenAddress 127.0.0.1
HostKey $D/host_key
PermitRootLogin prohibit-password
PasswordAuthentication no
UsePAM no
MaxStartups 100:30:200
MaxSessions 100
PidFile $D/sshd.pid
AuthorizedKeysFile $D/authorized_keys
StrictModes no
CFG
"${SSHD_RUN[@]}" -f "$D/sshd_config" -E "$D/sshd.log" || { echo "sshd did not start"; cat "$D/sshd.log"; exit 3; }
echo "127.0.0.1 $(cat "$D/host_key.pub" | cut -d' ' -f1,2)" > "$D/known_hosts"
sed -i "s/^127.0.0.1/[127.0.0.1]:47122/" "$D/known_hosts"
: > "$D/ssh_config"
for i in $(seq 1 16); do
  printf 'Host fleet%s\n  HostName 127.0.0.1\n  Port 47122\n  User root\n  IdentityFile %s/id\n  UserKnownHostsFile %s/known_hosts\n  HostKeyAlias fleet\n' "$i" "$D" "$D" >> "$D/ssh_config"
done
sed -i "s/^\[127.0.0.1\]:47122/fleet/" "$D/known_hosts"
export DFDOCTOR_SSH_CONFIG=$D/ssh_config NO_COLOR=1
mkdir -p /tmp/dfd-bench && printf 'import json\nprint("step 0", flush=True)\n' > /tmp/dfd-bench/train.py
ssh -F "$D/ssh_config" -o BatchMode=yes fleet1 true && echo "ssh ok" || { echo "ssh failed"; tail "$D/sshd.log"; }
LIGHT=(--only target.reachable --only imports.smoke --only log.writable --only launch.path --only deps.requirements)
cpu() { awk '/^cpu /{print ($2+$3+$4)/100}' /proc/stat; }
run() {  # name, targets...
  local name=$1; shift
  local args=(); for t in "$@"; do args+=(--target "$t"); done
  local c0 t0 c1 t1; c0=$(cpu); t0=$(date +%s.%N)
  dfdoctor check "${args[@]}" --parallel 16 "${LIGHT[@]}" --cwd /tmp/dfd-bench --log /tmp/dfd-bench/train.log \
    --format json --output "$OUT/fleet_ssh_$name.json" -- python3 train.py >/dev/null 2>&1
  local rc=$?; c1=$(cpu); t1=$(date +%s.%N)
  echo "$name: exit $rc wall $(python3 -c "print(round($t1-$t0,2))") s machine_cpu $(python3 -c "print(round($c1-$c0,2))") s"
}
ALL=(); for i in $(seq 1 16); do ALL+=("ssh://fleet$i"); done
for round in $(seq 1 "${ROUNDS:-3}"); do
  run "one_r$round" ssh://fleet1
  run "sixteen_r$round" "${ALL[@]}"
done
[ "${ROUNDS:-3}" -gt 0 ] && python3 - "$OUT" <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/fleet_ssh_sixteen_r*.json"))[-1:]:
    d = json.load(open(f))
    print(f, [(t["target"], t["verdict"]["state"]) for t in d["targets"] if t["verdict"]["state"] != "ok"] or "all 16 rows ok")
PY
kill "$(cat "$D/sshd.pid")"
rm -rf "$D"
echo "== left running: $(pgrep -fc 'dfdoctor-ssh' || true) ssh masters"
