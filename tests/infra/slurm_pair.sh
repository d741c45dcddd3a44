#!/usr/bin/env bash
# A real two-node Slurm 22.05 on this one host, for the tests of `check --slurm-nodes` over several nodes
# (idempotent, as root, about 2 s). A cluster of its own (`fx2`), beside slurm.sh's single-node one:
#   * slurmctld on 6827; nodes n1 and n2, each a slurmd of its own (ports 6831, 6832), both at 127.0.0.1.
#     The Debian build has no --enable-multiple-slurmd, so each slurmd runs in a private mount namespace where
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
set -euo pipefail

DIR=${DFDOCTOR_SLURM_PAIR_DIR:-/var/lib/dfdoctor-slurm-pair}
CONF=$DIR/etc/slurm.conf
NODES=(n1 n2)
PORTS=(6831 6832)
SHM=("" 64m)  # a /dev/shm of its own for a node, or "" for the host's
CLEAN_ENV=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
           SLURM_CONF="$CONF")
source "$(dirname "$0")/slurm_common.sh"  # start_daemon, alive, stop_all, start_munge
export SLURM_CONF=$CONF

[ "$(id -u)" = 0 ] || { echo "slurm_pair.sh: must run as root" >&2; exit 1; }
mkdir -p "$(dirname "$DIR")"
exec 9>"$DIR.lock"
flock -w 120 9 || { echo "slurm_pair.sh: another provisioning holds $DIR.lock" >&2; exit 1; }
for tool in slurmctld slurmd munged srun scontrol unshare; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || { echo "slurm_pair.sh: $tool is not installed (.ci/provision.sh installs it)" >&2; exit 1; }
done
mkdir -p "$DIR"/{ctld,node,quirks,etc,new} "${NODES[@]/#/$DIR/}"
chmod 755 "$DIR"
HOST=$(hostname -s)
CPUS=$(slurmd -C | head -1 | sed -e 's/.* CPUs=\([0-9]*\).*/\1/')

cat > "$DIR/new/slurm.conf" <<EOF
ClusterName=fx2
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
SlurmctldPort=6827
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
  echo "NodeName=${NODES[$i]} NodeHostname=$HOST NodeAddr=127.0.0.1 Port=${PORTS[$i]} CPUs=$CPUS RealMemory=4000 State=UNKNOWN" >> "$DIR/new/slurm.conf"
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
DFDOCTOR_SLURM_PAIR_PARTITION=pair
DFDOCTOR_SLURM_PAIR_SMALL_SHM_NODE=n2
EOF
  echo "$DIR/env"
}

running=1
same && alive "$DIR/slurmctld.pid" || running=0
for n in "${NODES[@]}"; do alive "$DIR/$n/slurmd.pid" || running=0; done
if [ $running = 1 ] && pgrep -x munged >/dev/null; then
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
cp "$DIR/new/slurm.conf" "$CONF"
install -m 755 "$DIR/new/taskprolog.sh" "$DIR/taskprolog.sh"

start_munge

start_daemon slurmctld -f "$CONF"
for _ in $(seq 1 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.1; done
for i in "${!NODES[@]}"; do
  n=${NODES[$i]}
  shm=${SHM[$i]:+mount -t tmpfs -o size=${SHM[$i]},mode=1777 tmpfs /dev/shm &&}
  start_daemon unshare --mount --propagation private \
    sh -c "mount --bind '$DIR/$n' '$DIR/node' && $shm exec slurmd -N '$n' -f '$CONF'"
done
for _ in $(seq 1 150); do all_idle && break; sleep 0.1; done
if ! all_idle; then
  for n in "${NODES[@]}"; do scontrol update NodeName="$n" State=RESUME >/dev/null 2>&1 || true; done
  for _ in $(seq 1 50); do all_idle && break; sleep 0.1; done
fi
all_idle || { echo "slurm_pair.sh: nodes not idle: $(sinfo -h -N -o '%N %t %E' 2>&1 | tr '\n' ' '); slurmctld: $(tail -c 400 "$DIR/slurmctld.log" | tr '\n' ' ')" >&2; exit 1; }
write_env
