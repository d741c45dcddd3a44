#!/usr/bin/env bash
# Issue 23 on an H200 host: stuck NCCL jobs are named, and torchrun with more ranks than GPUs is never "running".
#
#   1. nccl-never-joins: torchrun --nproc_per_node 2, NCCL, rank 1 asleep before init_process_group. Expected:
#      launch --watch 90 says FAILED [rank-missing] naming rank 1 and its line, well before the watch ends.
#   2. more-ranks-than-gpus: torchrun --nproc_per_node (GPUs + 1), each rank torch.cuda.set_device(LOCAL_RANK),
#      then NCCL all_reduce in a loop with prints. The extra rank dies at set_device. Expected: never RUNNING,
#      in each of 3 runs.
#   3. nccl-skips-allreduce: rank 1 skips an all_reduce. Expected: FAILED [collective-hang] naming rank 1.
# Every job's whole tree is killed after its verdict (ranks run in sessions of their own).
#
# Runs from the repo root on a machine whose plain `python3` has torch + CUDA; py-spy is taken from .venv/bin if
# there, else from PATH. Writes its results under "$OUT" (default ./gpu_stuck_out). Finishes within 8 minutes.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_stuck_out}"
mkdir -p "$OUT"
PY=python3
START=$(date +%s)
log() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$OUT/summary.txt"; }

if ! $PY -c 'import dfdoctor' 2>/dev/null; then
  $PY -m pip install --no-deps --no-build-isolation --no-index -e . >"$OUT/install.log" 2>&1 || log "install failed"
fi
[ -x .venv/bin/py-spy ] && export PATH="$PWD/.venv/bin:$PATH"
command -v py-spy >/dev/null || log "WARNING: py-spy not found: stacks fall back to the kernel's view"
NGPU=$($PY -c 'import torch; print(torch.cuda.device_count())')
log "GPUs: $NGPU; torch $($PY -c 'import torch; print(torch.__version__)')"
WORK=$(mktemp -d /tmp/gpu_stuck.XXXXXX)

cat >"$WORK/never_joins.py" <<'EOF'
import os, time
if os.environ.get("RANK") == "1":
    time.sleep(900)  # rank 1 never arrives
import torch, torch.distributed as dist
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
print("joined", flush=True)
EOF
cat >"$WORK/more_ranks.py" <<'EOF'
import os, time, torch, torch.distributed as dist
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))  # the extra rank dies here: invalid device ordinal
dist.init_process_group("nccl")
x = torch.ones(1 << 20, device="cuda")
for step in range(1000):
    dist.all_reduce(x)
    print(f"rank {dist.get_rank()} step {step}", flush=True)
    time.sleep(0.2)
EOF
cat >"$WORK/skips.py" <<'EOF'
import os, time, torch, torch.distributed as dist
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
rank = dist.get_rank()
x = torch.ones(1 << 20, device="cuda")
for step in range(3):
    dist.all_reduce(x); torch.cuda.synchronize()
    print(f"rank {rank} step {step}", flush=True)
if rank == 1:
    time.sleep(900)  # skips the next all_reduce
dist.all_reduce(x); torch.cuda.synchronize()
EOF

kill_tree() {  # every process of every run under $WORK: the job's tree, by the pid the record names
  $PY - "$WORK" <<'EOF'
import json, sys, pathlib, psutil
for rec in pathlib.Path(sys.argv[1]).rglob("record.jsonl"):
    for line in rec.read_text().splitlines():
        e = json.loads(line)
        if e.get("event") in ("spawned", "recorder"):
            try:
                root = psutil.Process(e["pid"])
                for p in [root] + root.children(recursive=True):
                    p.kill()
            except psutil.Error:
                pass
EOF
}

run_case() {  # name, watch, torchrun args...
  local name=$1 watch=$2; shift 2
  local t0=$(date +%s.%N)
  (cd "$WORK" && timeout $((watch + 60)) $PY -m dfdoctor launch --no-check --watch "$watch" --format json \
      --output "$OUT/$name.json" --format text -- $PY -m torch.distributed.run --standalone "$@") \
      >"$OUT/$name.txt" 2>&1
  local rc=$?
  local took=$($PY -c "import time; print(round(time.time() - $t0, 1))")
  local verdict=$($PY -c "import json; v=json.load(open('$OUT/$name.json'))['verdict']; print(v['state'], v['cause'])" 2>/dev/null)
  log "$name: exit $rc, verdict: $verdict, after $took s"
  kill_tree
}

run_case nccl-never-joins 90 --nproc_per_node 2 never_joins.py
for i in 1 2 3; do
  run_case more-ranks-than-gpus-$i 60 --nproc_per_node $((NGPU + 1)) more_ranks.py
done
if [ "$NGPU" -ge 2 ]; then
  run_case nccl-skips-allreduce 90 --nproc_per_node 2 skips.py
fi
grep -h "RUNNING" "$OUT"/more-ranks-than-gpus-*.txt >/dev/null && log "FAIL: a launch with more ranks than GPUs said RUNNING" \
  || log "ok: no launch with more ranks than GPUs said RUNNING"
log "done"
rm -rf "$WORK"
