#!/bin/bash
# Round 12 on a real GPU (issue 41: running is earned): each job under `dfdoctor launch`, then `dfdoctor status`,
# printing the verdicts and exit codes.
#   1. kernel-never-ends: prints a step every 0.1 s, then queues a kernel that spins for ever
#      (torch.cuda._sleep) and waits in torch.cuda.synchronize. Expected: never RUNNING/exit 0; the wait named
#      (cuda-sync-wait, the GPU busy), exit 1, in launch and in status.
#   2. autotune-compile: a healthy torch.compile(mode="max-autotune") before its first line, then a step every
#      0.1 s. Expected: RUNNING, exit 0 (status during and after the silent compile: stacks move, CPU grows).
#   3. rank-never-joins: torchrun --nproc_per_node 2 (NCCL, both ranks on GPU 0), rank 1 asleep before
#      init_process_group, rank 0 in all_reduce. Expected: FAILED [rank-missing] or [collective-hang], exit 1.
# Usage there:  OUT=/some/dir bash bench/gpu_round12.sh   (writes gpu_round12.txt). Under 8 minutes.
set -u
OUT=${OUT:?set OUT to a folder}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_round12.txt") 2>&1
cd "$(dirname "$0")/.."
START=$(date +%s)
t() { echo "[$(( $(date +%s) - START ))s] $*"; }
echo "== machine"; date -u; nvidia-smi -L
python3 -c "import sys, torch; print(sys.executable, torch.__version__, torch.version.cuda, torch.cuda.device_count())"
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >/tmp/pip.log 2>&1 || { tail -3 /tmp/pip.log; exit 1; }
[ -n "${PYSPY_DIR:-}" ] && export PATH="$PYSPY_DIR:$PATH"
command -v py-spy >/dev/null && py-spy --version || t "WARNING: no py-spy: stacks fall back to the kernel's view"
W=$(mktemp -d /tmp/round12.XXXXXX); cd "$W"

cat > kernel_never_ends.py <<'EOF'
import time, torch
x = torch.randn(1024, 1024, device="cuda")
for step in range(80):  # in its loop: launch may call it running while it prints (it is, then)
    y = (x @ x).sum().item()
    print(f"step {step}: loss {y:.3f}", flush=True)
    torch.cuda._sleep(50_000_000)  # ~0.03 s of GPU time: the step
    torch.cuda.synchronize()
    time.sleep(0.07)
torch.cuda._sleep(1 << 62)  # a kernel that does not end
torch.cuda.synchronize()
EOF
cat > autotune.py <<'EOF'
import time, torch
model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)]).cuda()
step_fn = torch.compile(model, mode="max-autotune")
x = torch.randn(256, 1024, device="cuda")
for step in range(100000):
    y = step_fn(x).sum().item()
    print(f"step {step}: loss {y:.3f}", flush=True)
    time.sleep(0.1)
EOF
cat > never_joins.py <<'EOF'
import os, time
if os.environ.get("RANK") == "1":
    time.sleep(900)  # rank 1 never arrives
import torch, torch.distributed as dist
torch.cuda.set_device(0)
dist.init_process_group("nccl")
print("rank", dist.get_rank(), "joined", flush=True)
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
EOF

run() {  # NAME WATCH STATUS_AFTER -- command...
  local name=$1 watch=$2 after=$3; shift 4
  mkdir -p "$W/$name"; cp "$W"/*.py "$W/$name/"  # the job runs in its own folder (--cwd)
  t "== $name: launch --watch $watch"
  dfdoctor launch --cwd "$W/$name" --no-check --watch "$watch" --format json --output "$OUT/$name.json" \
    --format text -- "$@"; t "$name: launch exit $?"
  sleep "$after"
  t "== $name: status (${after} s later)"
  nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader
  dfdoctor status --cwd "$W/$name"; t "$name: status exit $?"
  dfdoctor stop --cwd "$W/$name" >/dev/null 2>&1; t "$name: stopped"
}
run kernel-never-ends 20 10 -- python3 -u kernel_never_ends.py
# the compile is silent for a minute or more: launch and status look during it, a last status after it
run autotune-compile 15 20 -- python3 -u autotune.py  # (stops it at the end: run once more, to its first lines)
mkdir -p "$W/autotune-late"; cp "$W"/*.py "$W/autotune-late/"; t "== autotune-compile again: launch --watch 300 (to its first lines)"
dfdoctor launch --cwd "$W/autotune-late" --no-check --watch 300 -- python3 -u autotune.py; t "launch exit $?"
dfdoctor status --cwd "$W/autotune-late"; t "status exit $?"
dfdoctor stop --cwd "$W/autotune-late" >/dev/null 2>&1
run rank-never-joins 60 5 -- torchrun --nproc_per_node 2 never_joins.py
t "done"
