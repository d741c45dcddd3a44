#!/usr/bin/env bash
# Issue 20, round 8, on an H200 host (torch with CUDA): the loop-based settle on real GPU jobs.
#   1. trainer-noguard: the bundled trainer's GPU preset without its compile guard. Its target steps (a loop
#      that reaches its total in ~2.5 s) come before the drafters' flex_attention compile, which deadlocks
#      later. Expected: not RUNNING during the target steps; when launch says RUNNING (drafters still print),
#      `status` 40 s later names compile-deadlock.
#   2. trainer-guard: the same with the guard: it trains and finishes. Recorded: the verdict and its time.
#   3. gpu-loop: a real GPU loop printing `step N loss X`. Expected: RUNNING, "in its loop", in under 10 s.
#   4. gpu-dies-after-start: a layer table at once, four shards a second apart, then a missing data file at
#      ~6 s. Expected: FAILED input-missing, never RUNNING.
#   5. two-ranks-one-gpu (x2): torchrun with 2 ranks on one visible GPU. Expected: never RUNNING (round 6's case:
#      the torchrun part of the settle is not shortened by a loop).
# Self-contained: run from the repo root on a machine whose python3 has torch with CUDA; installs this checkout
# (no index, no deps) when `import dfdoctor` fails; py-spy from .venv/bin (carried). Results under $OUT.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_settle_round8_out}"
mkdir -p "$OUT"
PY=python3
START=$(date +%s)
log() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$OUT/summary.txt"; }
if ! $PY -c 'import dfdoctor' 2>/dev/null; then
  $PY -m pip install --no-deps --no-build-isolation --no-index -e . >"$OUT/install.log" 2>&1 || log "install failed (see install.log)"
fi
[ -x .venv/bin/py-spy ] && export PATH="$PWD/.venv/bin:$PATH"
command -v py-spy >/dev/null || log "WARNING: py-spy not found: stacks fall back to the kernel's view"
log "torch $($PY -c 'import torch; print(torch.__version__, torch.cuda.get_device_name())'); $(uptime)"
WORK=$(mktemp -d /tmp/gpu_settle8.XXXXXX)
cp bench/gpu_jobs/gpu_loop.py bench/gpu_jobs/gpu_dies_after_start.py "$WORK/"
cat >"$WORK/one_gpu.py" <<'PYEOF'
import os, time, torch, torch.distributed as dist
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))  # rank 1 dies here with one visible GPU
dist.init_process_group("nccl")
x = torch.ones(1 << 20, device="cuda")
for step in range(1000):
    dist.all_reduce(x)
    print(f"rank {dist.get_rank()} step {step}", flush=True)
    time.sleep(0.2)
PYEOF

kill_runs() {  # every process of every run under $WORK
  $PY - "$WORK" <<'PYEOF'
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
PYEOF
}

case_() {  # name, watch, env assignments..., --, command...
  local name=$1 watch=$2; shift 2
  local envs=(X=1)
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  mkdir -p "$WORK/$name"
  local t0=$(date +%s.%N)
  (cd "$WORK/$name" && env "${envs[@]}" timeout $((watch + 60)) $PY -m dfdoctor launch --no-check --watch "$watch" \
      --log "$WORK/$name/train.log" --format json --output "$OUT/$name.json" --format text -- "$@") \
      >"$OUT/$name.txt" 2>&1
  local rc=$?
  local took=$($PY -c "import time; print(round(time.time() - $t0, 1))")
  log "$name: exit $rc after $took s: $($PY -c "import json; v=json.load(open('$OUT/$name.json'))['verdict']; print(v['state'], v['cause'], '|', v['summary'][:200], '|', [e for e in v['evidence'] if 'alive' in e or 'loop' in e][:2])" 2>&1 | tail -1)"
}
state_of() { $PY -c "import json,sys; print(json.load(open(sys.argv[1]))['verdict']['state'])" "$1" 2>/dev/null; }

case_ trainer-noguard 150 -- $PY -u -m dfdoctor.trainer --preset gpu --no-compile-guard --out "$WORK/ng" &
sleep 2
case_ trainer-guard 150 -- $PY -u -m dfdoctor.trainer --preset gpu --out "$WORK/g"
wait
if [ "$(state_of "$OUT/trainer-noguard.json")" = running ]; then  # its drafters still printed: look again later
  sleep 40
  (cd "$WORK/trainer-noguard" && $PY -m dfdoctor status --watch 5 --format json --output "$OUT/trainer-noguard-status.json" \
      --format text) >"$OUT/trainer-noguard-status.txt" 2>&1
  log "trainer-noguard status 40 s after its launch: $(state_of "$OUT/trainer-noguard-status.json") $($PY -c "import json; print(json.load(open('$OUT/trainer-noguard-status.json'))['verdict']['cause'])" 2>&1)"
fi
kill_runs
case_ gpu-loop 60 -- $PY "$WORK/gpu_loop.py" 60
kill_runs
case_ gpu-dies-after-start 60 -- $PY "$WORK/gpu_dies_after_start.py"
for i in 1 2; do
  case_ two-ranks-one-gpu-$i 60 CUDA_VISIBLE_DEVICES=0 -- $PY -m torch.distributed.run --standalone --nproc_per_node 2 "$WORK/one_gpu.py"
  kill_runs
done
[ "$(state_of "$OUT/trainer-noguard.json")" != running ] && log "trainer-noguard: not running at launch" || log "trainer-noguard: running at launch (its drafters still printed), status later: see above"
[ "$(state_of "$OUT/gpu-loop.json")" = running ] && grep -q "in its loop" "$OUT/gpu-loop.txt" && log "ok: gpu-loop RUNNING in its loop" || log "FAIL: gpu-loop"
[ "$(state_of "$OUT/gpu-dies-after-start.json")" != running ] && log "ok: gpu-dies-after-start never RUNNING" || log "FAIL: gpu-dies-after-start said RUNNING"
for f in "$OUT"/two-ranks-one-gpu-*.json; do [ "$(state_of "$f")" = running ] && log "FAIL: $(basename "$f") said RUNNING"; done
log "done"
kill_runs
rm -rf "$WORK"
# at most 8 files come back from the device: everything in one archive, the summary beside it
(cd "$OUT" && tar czf /tmp/gpu_settle_round8.tgz --exclude summary.txt . && find . -type f ! -name summary.txt -delete \
  && mv /tmp/gpu_settle_round8.tgz .)
