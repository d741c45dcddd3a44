#!/usr/bin/env bash
# A real single-node Slurm 22.05 for the Slurm tests, without systemd (idempotent, as root, a few seconds):
#   * munged; a MariaDB of its own (datadir under $DIR, 127.0.0.1:$DB_PORT) and slurmdbd, so sacct answers;
#   * slurmctld and slurmd on this host, one node with $CPUS CPUs and at least 16 GiB (config_overrides), so
#     the Slurm tests of several xdist workers run their jobs side by side instead of queueing behind each other on
#     this machine's 2 cores; two partitions: `debug` (default) and `urgent`, whose jobs preempt debug's
#     (PreemptMode=CANCEL), so a preempted job is a real one;
#   * proctrack/cgroup + task/cgroup on cgroup v1: `--mem` is enforced and an overrun is a real OUT_OF_MEMORY
#     (cores are not constrained: a cpuset cannot name CPUs the machine lacks).
# Config in /etc/slurm (where sbatch, srun and sacct look), state and logs under $DIR. Returns once `sinfo`
# shows the node idle; prints the env file to source (DFDOCTOR_SLURM_*). Ports: 6817-6819 (Slurm's own) and
# $DB_PORT for the private MariaDB, none of which the sshd/LXC/docker infrastructure uses.
set -euo pipefail

DIR=${DFDOCTOR_SLURM_DIR:-/var/lib/dfdoctor-slurm}
DB_PORT=${DFDOCTOR_SLURM_DB_PORT:-3317}
CONF=$(dirname "${SLURM_CONF:-/etc/slurm/slurm.conf}")  # another folder only for a second cluster (its own netns)
CLEAN_ENV=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
           SLURM_CONF="$CONF/slurm.conf")
source "$(dirname "$0")/slurm_common.sh"  # start_daemon, alive, stop_all, start_munge

[ "$(id -u)" = 0 ] || { echo "slurm.sh: must run as root" >&2; exit 1; }
mkdir -p "$(dirname "$DIR")"
exec 9>"$DIR.lock"
flock -w 120 9 || { echo "slurm.sh: another provisioning holds $DIR.lock" >&2; exit 1; }
for tool in slurmctld slurmd slurmdbd munged sbatch sacct mariadbd mariadb-install-db; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || { echo "slurm.sh: $tool is not installed (.ci/provision.sh installs it)" >&2; exit 1; }
done
mkdir -p "$DIR"/{ctld,spool,db,new} "$CONF"
chmod 755 "$DIR"

# --- the configuration, written to $DIR/new first: a cluster already running this exact config is kept -----
HW=$(slurmd -C | head -1 | sed -e 's/ *$//')
NODENAME=$(echo "$HW" | sed -e 's/^NodeName=\([^ ]*\).*/\1/')
MEM=$(echo "$HW" | sed -e 's/.* RealMemory=\([0-9]*\).*/\1/')
MEM=$((MEM > 16384 ? MEM : 16384))  # a 7 GiB CI machine holds 6 jobs of DefMemPerCPU: jobs use far less than asked
CPUS=8  # what several workers' jobs at once need (see the top)
NODE="NodeName=$NODENAME CPUs=$CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM"
[ -f "$DIR/dbpass" ] || { head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$DIR/dbpass"; chmod 600 "$DIR/dbpass"; }
DBPASS=$(cat "$DIR/dbpass")
cat > "$DIR/new/slurm.conf" <<EOF
ClusterName=fx
SlurmctldHost=$(hostname -s)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
MinJobAge=600
SlurmdTimeout=10
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
DefMemPerCPU=1024
JobAcctGatherType=jobacct_gather/cgroup
JobAcctGatherFrequency=task=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
JobCompType=jobcomp/none
$NODE State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=urgent Nodes=ALL Default=NO MaxTime=INFINITE State=UP PriorityTier=2
EOF
cat > "$DIR/new/cgroup.conf" <<EOF
CgroupAutomount=yes
ConstrainCores=no
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
AllowedSwapSpace=0
EOF
cat > "$DIR/new/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$DBPASS
StorageLoc=slurm_acct_db
PidFile=$DIR/slurmdbd.pid
LogFile=$DIR/slurmdbd.log
EOF

same() { for f in slurm.conf cgroup.conf slurmdbd.conf; do cmp -s "$DIR/new/$f" "$CONF/$f" || return 1; done; }
node_idle() { [ "$(sinfo -h -n "$NODENAME" -o %t 2>/dev/null | head -1)" = idle ] || \
              [ "$(sinfo -h -n "$NODENAME" -o %t 2>/dev/null | head -1)" = mix ] || \
              [ "$(sinfo -h -n "$NODENAME" -o %t 2>/dev/null | head -1)" = alloc ]; }

write_env() {
  cat > "$DIR/env" <<EOF
DFDOCTOR_SLURM_DIR=$DIR
DFDOCTOR_SLURM_NODE=$NODENAME
DFDOCTOR_SLURM_CPUS=$CPUS
DFDOCTOR_SLURM_PARTITION=debug
DFDOCTOR_SLURM_URGENT=urgent
EOF
  echo "$DIR/env"
}

if same && alive "$DIR/slurmctld.pid" && alive "$DIR/slurmd.pid" && alive "$DIR/slurmdbd.pid" \
   && alive "$DIR/mysql/mysqld.pid" && pgrep -x munged >/dev/null; then
  # Running this config already; a node left down by a test (a stopped slurmd) is brought back.
  state=$(sinfo -h -n "$NODENAME" -o %t 2>/dev/null | head -1 || true)
  case "$state" in
    idle|mix|alloc|comp) write_env; exit 0 ;;
    down*|drain*|fail*) scontrol update NodeName="$NODENAME" State=RESUME >/dev/null 2>&1 || true
      for _ in $(seq 1 50); do node_idle && { write_env; exit 0; }; sleep 0.1; done ;;
  esac
fi

# --- (re)start: stop what runs, in parallel (each shutdown takes 1-3 s) ----------------------------------
pids=()
for p in slurmd slurmctld slurmdbd; do alive "$DIR/$p.pid" && pids+=("$(cat "$DIR/$p.pid")"); done
stop_all "${pids[@]}"
cp "$DIR/new/slurm.conf" "$DIR/new/cgroup.conf" "$CONF/"
install -m 600 "$DIR/new/slurmdbd.conf" "$CONF/slurmdbd.conf"

# --- munge -------------------------------------------------------------------------------------------------
start_munge

# --- MariaDB of our own, then slurmdbd ----------------------------------------------------------------------
mkdir -p "$DIR/mysql"; chown mysql:mysql "$DIR/db" "$DIR/mysql"
if [ ! -d "$DIR/db/mysql" ]; then
  mariadb-install-db --user=mysql --datadir="$DIR/db" --auth-root-authentication-method=socket >/dev/null 2>&1
fi
if ! alive "$DIR/mysql/mysqld.pid"; then
  detach /dev/null mariadbd --user=mysql --datadir="$DIR/db" --port="$DB_PORT" \
     --bind-address=127.0.0.1 --socket="$DIR/mysql/mysqld.sock" --pid-file="$DIR/mysql/mysqld.pid" \
     --log-error="$DIR/mysql/mysqld.log" --skip-name-resolve --innodb-buffer-pool-size=32M
  for _ in $(seq 1 100); do [ -S "$DIR/mysql/mysqld.sock" ] && alive "$DIR/mysql/mysqld.pid" && break; sleep 0.1; done
fi
mariadb --socket="$DIR/mysql/mysqld.sock" -u root <<EOF
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DBPASS';
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$DBPASS';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$DBPASS';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$DBPASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
EOF
start_daemon slurmdbd
for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/6819) 2>/dev/null && break; sleep 0.1; done

# --- slurmctld, slurmd --------------------------------------------------------------------------------------
start_daemon slurmctld
for _ in $(seq 1 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.1; done
start_daemon slurmd
for _ in $(seq 1 150); do node_idle && break; sleep 0.1; done
if ! node_idle; then
  scontrol update NodeName="$NODENAME" State=RESUME >/dev/null 2>&1 || true
  for _ in $(seq 1 50); do node_idle && break; sleep 0.1; done
fi
node_idle || { echo "slurm.sh: node $NODENAME is not idle: $(sinfo -h -N -o '%N %t %E' 2>&1 | head -3); slurmctld: $(tail -c 400 "$DIR/slurmctld.log" | tr '\n' ' ')" >&2; exit 1; }
write_env
