#!/usr/bin/env bash
# A real two-node Slurm 22.05 on this one host, for the tests of `check --slurm-nodes` over several nodes
# (idempotent, as root, about 2 s). A cluster of its own (`fx2n`), beside slurm.sh's single-node one:
#   * slurmctld on 6837; nodes n1 and n2, each a slurmd of its own (ports 6831, 6832);
#   * each node has a network of its own, as nodes of a real cluster do: a network namespace with one interface
#     (eth0, n1 198.18.77.11, n2 198.18.77.12: RFC 2544's benchmark range, where nothing real lives) on a bridge;
#     the host is 198.18.77.1 on that bridge (slurmctld, srun and the tests reach the nodes there). The bridge lives
#     in a namespace of its own (dfdpair-sw), so node-to-node traffic never meets the host's firewall (docker's
#     FORWARD policy DROP would stop it). In a node's namespace the host name resolves to the node's own address
#     (an /etc/hosts of its own), as on a real node: gloo binds to what the host name resolves to;
#   * `slurm_pair.sh cut FROM TO` makes node FROM unable to reach node TO except TO's slurmd port (an nftables
#     rule in TO's namespace drops what FROM sends, as a firewall on a node that opens only Slurm's port does);
#     `slurm_pair.sh mend` removes every such rule. Slurm itself keeps working while a node is cut off;
#   * the Debian build has no --enable-multiple-slurmd, so each slurmd also runs in a private mount namespace where
#     $DIR/node is its own folder (spool, pid file, log): one slurm.conf serves both nodes;
#   * proctrack/linuxproc and no task plugin: two slurmds of one job on one host must not share (and kill) a
#     job cgroup, which proctrack/cgroup would make them do;
#   * no accounting: these tests read scontrol and the checks' own reports, never sacct;
#   * the nodes differ in one fact by construction: n2's /dev/shm is a 64 MiB tmpfs of its own (docker's
#     default size), mounted in its slurmd's mount namespace, which its tasks inherit;
#   * a node can be made to differ more: each line of $DIR/quirks/NODE.env is told to that node's tasks by the
#     TaskProlog (`export NAME=VALUE`), as a node with its own PYTHONPATH or its own interface names would.
# Config in $DIR/etc/slurm.conf (the tests set SLURM_CONF to it); munged is slurm.sh's (one key for both).
# Prints the env file to source (DFDOCTOR_SLURM_PAIR_*).
# (Round 5's pair, all at 127.0.0.1 in /var/lib/dfdoctor-slurm-pair with slurmctld on 6827, may still run beside
# this one: the folder and port differ, so neither stops the other.)
set -euo pipefail

DIR=${DFDOCTOR_SLURM_PAIR_DIR:-/var/lib/dfdoctor-slurm-pairnet}
CONF=$DIR/etc/slurm.conf
NODES=(n1 n2)
PORTS=(6831 6832)
SHM=("" 64m)  # a /dev/shm of its own for a node, or "" for the host's
NET=198.18.77  # the nodes' /24 (see above)
HOST_ADDR=$NET.1
ADDRS=("$NET.11" "$NET.12")
NS=dfdpair  # namespaces dfdpair-n1, dfdpair-n2 and the bridge's dfdpair-sw; the host's end of the bridge: dfdpair0
CUT_TABLE=dfdpair_cut
CLEAN_ENV=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
           SLURM_CONF="$CONF")
source "$(dirname "$0")/slurm_common.sh"  # start_daemon, alive, stop_all, start_munge
export SLURM_CONF=$CONF

[ "$(id -u)" = 0 ] || { echo "slurm_pair.sh: must run as root" >&2; exit 1; }
for tool in slurmctld slurmd munged srun scontrol unshare nsenter ip nft; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || { echo "slurm_pair.sh: $tool is not installed (.ci/provision.sh installs it)" >&2; exit 1; }
done

index_of() { local i; for i in "${!NODES[@]}"; do [ "${NODES[$i]}" = "$1" ] && { echo "$i"; return 0; }; done
             echo "slurm_pair.sh: no node $1 (nodes: ${NODES[*]})" >&2; return 1; }
# mend: every cut removed (a node without one is fine). cut FROM TO: a firewall on TO drops the connections FROM
# opens to it (silently, as most do; `reject` answers with ICMP admin-prohibited instead, as firewalld does),
# except to TO's slurmd port, so the job still starts and ends while FROM's tasks cannot reach TO's; connections
# TO opens, and their answers, still pass.
mend() { local n; for n in "${NODES[@]}"; do ip netns exec "$NS-$n" nft delete table inet $CUT_TABLE 2>/dev/null || true; done; }
cut_off() {  # FROM TO [drop|reject]
  local from to verdict=drop; from=$(index_of "$1") && to=$(index_of "$2") || exit 2
  case "${3:-drop}" in drop) ;; reject) verdict="reject with icmp type admin-prohibited" ;;
    *) echo "slurm_pair.sh: cut takes drop or reject, not $3" >&2; exit 2 ;; esac
  ip netns exec "$NS-$2" nft delete table inet $CUT_TABLE 2>/dev/null || true
  ip netns exec "$NS-$2" nft -f - <<EOF
table inet $CUT_TABLE {
  chain input {
    type filter hook input priority 0; policy accept;
    ct state established,related accept
    ip saddr ${ADDRS[$from]} tcp dport != ${PORTS[$to]} $verdict
  }
}
EOF
}
case "${1:-}" in
  cut) [ $# = 3 ] || [ $# = 4 ] || { echo "usage: slurm_pair.sh cut FROM TO [drop|reject]" >&2; exit 2; }
       cut_off "${@:2}"; exit 0 ;;
  mend) mend; exit 0 ;;
  "") ;;
  *) echo "usage: slurm_pair.sh [cut FROM TO [drop|reject] | mend]" >&2; exit 2 ;;
esac

mkdir -p "$(dirname "$DIR")"
exec 9>"$DIR.lock"
flock -w 120 9 || { echo "slurm_pair.sh: another provisioning holds $DIR.lock" >&2; exit 1; }
mkdir -p "$DIR"/{ctld,node,quirks,etc,new} "${NODES[@]/#/$DIR/}"
chmod 755 "$DIR"
HOST=$(hostname -s)
CPUS=$(slurmd -C | head -1 | sed -e 's/.* CPUs=\([0-9]*\).*/\1/')

# --- the nodes' network -----------------------------------------------------------------------------------------
has_addr() { ip ${1:+-n "$1"} -br addr show dev "$2" 2>/dev/null | grep -q "UP.* $3/24"; }
net_ok() {
  local i; has_addr "" ${NS}0 "$HOST_ADDR" || return 1
  for i in "${!NODES[@]}"; do has_addr "$NS-${NODES[$i]}" eth0 "${ADDRS[$i]}" || return 1; done
}
net_down() {
  local n; ip link del ${NS}0 2>/dev/null || true
  for n in sw "${NODES[@]}"; do ip netns del "$NS-$n" 2>/dev/null || true; done
}
net_up() {
  net_down
  ip netns add $NS-sw
  ip -n $NS-sw link add br0 type bridge
  ip -n $NS-sw link set dev br0 up
  ip link add ${NS}0 type veth peer name up0 netns $NS-sw
  ip -n $NS-sw link set dev up0 master br0 up
  ip addr add "$HOST_ADDR/24" dev ${NS}0
  ip link set dev ${NS}0 up
  local i n
  for i in "${!NODES[@]}"; do
    n=${NODES[$i]}
    ip netns add "$NS-$n"
    ip -n "$NS-$n" link set dev lo up
    ip -n "$NS-$n" link add eth0 type veth peer name "to-$n" netns $NS-sw
    ip -n $NS-sw link set dev "to-$n" master br0 up
    ip -n "$NS-$n" addr add "${ADDRS[$i]}/24" dev eth0
    ip -n "$NS-$n" link set dev eth0 up
  done
}
# a slurmd runs in its node's network namespace (not one left from an earlier set-up)
in_netns() { [ "$(stat -L -c %i "/proc/$(cat "$DIR/$1/slurmd.pid")/ns/net" 2>/dev/null)" = "$(stat -L -c %i "/run/netns/$NS-$1" 2>/dev/null)" ]; }

cat > "$DIR/new/slurm.conf" <<EOF
ClusterName=fx2n
SlurmctldHost=$HOST($HOST_ADDR)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
SlurmctldPort=6837
SlurmdPort=${PORTS[0]}
StateSaveLocation=$DIR/ctld
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdSpoolDir=$DIR/node
SlurmdPidFile=$DIR/node/slurmd.pid
SlurmdLogFile=$DIR/node/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
TaskProlog=$DIR/taskprolog.sh
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerParameters=batch_sched_delay=0
MinJobAge=300
SlurmdTimeout=10
ReturnToService=2
MpiDefault=none
DefMemPerCPU=512
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
EOF
for i in "${!NODES[@]}"; do
  echo "NodeName=${NODES[$i]} NodeHostname=$HOST NodeAddr=${ADDRS[$i]} Port=${PORTS[$i]} CPUs=$CPUS RealMemory=4000 State=UNKNOWN" >> "$DIR/new/slurm.conf"
  printf '127.0.0.1 localhost\n%s %s\n' "${ADDRS[$i]}" "$HOST" > "$DIR/${NODES[$i]}/hosts"
done
echo "PartitionName=pair Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP" >> "$DIR/new/slurm.conf"
echo "# /dev/shm per node (slurm_pair.sh): ${SHM[*]/#/shm=}" >> "$DIR/new/slurm.conf"  # a change restarts the nodes
cat > "$DIR/new/taskprolog.sh" <<'EOF'
#!/bin/sh
# This node's quirks, for tests that need one node to differ: each line of quirks/NODE.env is told to the task.
f="$(dirname "$0")/quirks/$SLURMD_NODENAME.env"
[ -f "$f" ] && cat "$f"
exit 0
EOF

same() { cmp -s "$DIR/new/slurm.conf" "$CONF" && cmp -s "$DIR/new/taskprolog.sh" "$DIR/taskprolog.sh"; }
all_idle() {
  local states; states=$(sinfo -h -N -p pair -o %t 2>/dev/null | sort -u | tr '\n' ' ')
  [ -n "$states" ] && [ -z "$(echo "$states" | tr ' ' '\n' | grep -v -x -e idle -e mix -e alloc -e '')" ] && \
    [ "$(sinfo -h -N -p pair -o %N 2>/dev/null | wc -l)" = "${#NODES[@]}" ]
}
write_env() {
  cat > "$DIR/env" <<EOF
DFDOCTOR_SLURM_PAIR_DIR=$DIR
DFDOCTOR_SLURM_PAIR_CONF=$CONF
DFDOCTOR_SLURM_PAIR_NODES=$(IFS=,; echo "${NODES[*]}")
DFDOCTOR_SLURM_PAIR_ADDRS=$(IFS=,; echo "${ADDRS[*]}")
DFDOCTOR_SLURM_PAIR_PARTITION=pair
DFDOCTOR_SLURM_PAIR_SMALL_SHM_NODE=n2
DFDOCTOR_SLURM_PAIR_SCRIPT=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
EOF
  echo "$DIR/env"
}

running=1
net_ok || running=0
same && alive "$DIR/slurmctld.pid" || running=0
for n in "${NODES[@]}"; do alive "$DIR/$n/slurmd.pid" && in_netns "$n" || running=0; done
if [ $running = 1 ] && pgrep -x munged >/dev/null; then
  mend  # a cut left by a test that died
  for n in "${NODES[@]}"; do  # a node left down by a test is brought back
    case "$(sinfo -h -n "$n" -o %t 2>/dev/null | head -1)" in
      down*|drain*|fail*) scontrol update NodeName="$n" State=RESUME >/dev/null 2>&1 || true ;;
    esac
  done
  for _ in $(seq 1 50); do all_idle && break; sleep 0.1; done
  all_idle && { write_env; exit 0; }
fi

# --- (re)start ------------------------------------------------------------------------------------------------
pids=()
for f in "$DIR/slurmctld.pid" "${NODES[@]/#/$DIR/}"; do
  [ -d "$f" ] && f=$f/slurmd.pid
  alive "$f" && pids+=("$(cat "$f")")
done
stop_all "${pids[@]}"
net_ok || net_up
mend
cp "$DIR/new/slurm.conf" "$CONF"
install -m 755 "$DIR/new/taskprolog.sh" "$DIR/taskprolog.sh"

start_munge

start_daemon slurmctld -f "$CONF"
for _ in $(seq 1 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.1; done
for i in "${!NODES[@]}"; do
  n=${NODES[$i]}
  shm=${SHM[$i]:+mount -t tmpfs -o size=${SHM[$i]},mode=1777 tmpfs /dev/shm &&}
  start_daemon nsenter --net="/run/netns/$NS-$n" unshare --mount --propagation private \
    sh -c "mount --bind '$DIR/$n' '$DIR/node' && mount --bind '$DIR/$n/hosts' /etc/hosts && $shm exec slurmd -N '$n' -f '$CONF'"
done
for _ in $(seq 1 150); do all_idle && break; sleep 0.1; done
if ! all_idle; then
  for n in "${NODES[@]}"; do scontrol update NodeName="$n" State=RESUME >/dev/null 2>&1 || true; done
  for _ in $(seq 1 50); do all_idle && break; sleep 0.1; done
fi
all_idle || { echo "slurm_pair.sh: nodes not idle: $(sinfo -h -N -o '%N %t %E' 2>&1 | tr '\n' ' '); slurmctld: $(tail -c 400 "$DIR/slurmctld.log" | tr '\n' ' ')" >&2; exit 1; }
write_env
