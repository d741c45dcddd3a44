#!/usr/bin/env bash
# Issue 23, round 6, on an H200 host (torch with CUDA and NCCL):
#   1. nccl-rank0-leaves: torchrun --nproc_per_node 2, NCCL (lazy init), rank 1 asleep before init_process_group,
#      rank 0 returns from init_process_group and exits 0 without a collective. Round 5 said `sleeping`.
#      Expected: FAILED [rank-missing], "rank 1 never joined the process group; rank 0 already ended", rank 1's
#      line (never_joins.py:4) in the evidence.
#   2. nccl-never-joins: as 1, but rank 0 then calls all_reduce (it waits for rank 1). Expected: FAILED
#      [rank-missing] or [collective-hang] naming rank 1 and its line.
#   3. two-ranks-one-gpu: CUDA_VISIBLE_DEVICES=0, torchrun --nproc_per_node 2, each rank set_device(LOCAL_RANK):
#      rank 1 dies at set_device. Expected: never RUNNING, in each of 3 runs.
# Every job's whole tree is killed after its verdict (ranks run in sessions of their own).
#
# Self-contained: run from the repo root on a machine whose plain `python3` has torch with CUDA. It installs
# this checkout (no index, no deps) when `import dfdoctor` fails; py-spy from .venv/bin or PATH. Results under
# "$OUT" (default ./gpu_stuck_round6_out): summary.txt, NAME.txt (text verdict), NAME.json. Under 6 minutes.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_stuck_round6_out}"
mkdir -p "$OUT"
PY=python3
START=$(date +%s)
log() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$OUT/summary.txt"; }

if ! $PY -c 'import dfdoctor' 2>/dev/null; then
  $PY -m pip install --no-deps --no-build-isolation --no-index -e . >"$OUT/install.log" 2>&1 || log "install failed (see install.log)"
fi
[ -x .venv/bin/py-spy ] && export PATH="$PWD/.venv/bin:$PATH"
command -v py-spy >/dev/null || log "WARNING: py-spy not found: stacks fall back to the kernel's view"
NGPU=$($PY -c 'import torch; print(torch.cuda.device_count())')
log "GPUs: $NGPU; torch $($PY -c 'import torch; print(torch.__version__)'); $(uptime)"
WORK=$(mktemp -d /tmp/gpu_stuck6.XXXXXX)

cat >"$WORK/rank0_leaves.py" <<'EOF'
import os, time
if os.environ.get("RANK") == "1":
    time.sleep(900)  # rank 1 never arrives
import torch, torch.distributed as dist
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")  # lazy: returns without rank 1
print("rank", dist.get_rank(), "joined; leaving without a collective", flush=True)
EOF
cat >"$WORK/never_joins.py" <<'EOF'
import os, time
if os.environ.get("RANK") == "1":
    time.sleep(900)  # rank 1 never arrives
import torch, torch.distributed as dist
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
print("rank", dist.get_rank(), "joined", flush=True)
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
EOF
cat >"$WORK/one_gpu.py" <<'EOF'
import os, time, torch, torch.distributed as dist
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))  # rank 1 dies here with one visible GPU
dist.init_process_group("nccl")
x = torch.ones(1 << 20, device="cuda")
for step in range(1000):
    dist.all_reduce(x)
    print(f"rank {dist.get_rank()} step {step}", flush=True)
    time.sleep(0.2)
EOF

kill_tree() {  # every process of every run under $WORK: the job's tree, by the pids the record names
  $PY - "$WORK" <<'EOF'
import json, sys, pathlib, psutil
for rec in pathlib.Path(sys.argv[1]).rglob("record.jsonl"):
    for line in rec.read_text().splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("event") in ("spawned", "recorder"):
            try:
                root = psutil.Process(e["pid"])
                for p in [root] + root.children(recursive=True):
                    p.kill()
            except psutil.Error:
                pass
EOF
}

run_case() {  # name, watch, env assignments..., --, torchrun args...
  local name=$1 watch=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local t0=$(date +%s.%N)
  (cd "$WORK" && env "${envs[@]}" timeout $((watch + 60)) $PY -m dfdoctor launch --no-check --watch "$watch" \
      --format json --output "$OUT/$name.json" --format text -- $PY -m torch.distributed.run --standalone "$@") \
      >"$OUT/$name.txt" 2>&1
  local rc=$?
  local took=$($PY -c "import time; print(round(time.time() - $t0, 1))")
  local verdict=$($PY -c "import json; v=json.load(open('$OUT/$name.json'))['verdict']; print(v['state'], v['cause'], '|', v['summary'])" 2>/dev/null)
  log "$name: exit $rc after $took s: $verdict"
  kill_tree
}

run_case nccl-rank0-leaves 90 X=1 -- --nproc_per_node 2 rank0_leaves.py
[ "$($PY -c "import json; print(json.load(open('$OUT/nccl-rank0-leaves.json'))['verdict']['cause'])" 2>/dev/null)" = rank-missing ] && grep -q 'rank0_leaves.py:3' "$OUT/nccl-rank0-leaves.txt" \
  && log "ok: rank 0 ended, rank 1 named rank-missing with its line" || log "FAIL: nccl-rank0-leaves was not rank-missing with rank 1's line"
run_case nccl-never-joins 90 X=1 -- --nproc_per_node 2 never_joins.py
for i in 1 2 3; do
  run_case two-ranks-one-gpu-$i 60 CUDA_VISIBLE_DEVICES=0 -- --nproc_per_node 2 one_gpu.py
done
verdict_of() { $PY -c "import json,sys; v=json.load(open(sys.argv[1]))['verdict']; print(v['state'], v['cause'])" "$1" 2>/dev/null; }
if for f in "$OUT"/two-ranks-one-gpu-*.json; do verdict_of "$f"; done | grep -q '^running'; then
  log "FAIL: a launch of 2 ranks on one GPU said RUNNING"
else
  log "ok: no launch of 2 ranks on one GPU said RUNNING"
fi
log "done"
rm -rf "$WORK"
