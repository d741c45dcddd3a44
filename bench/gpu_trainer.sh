#!/usr/bin/env bash
# One batched GPU session (the `device` tool): the trainer with flex_attention in 4 drafter threads, with and
# without the compile guard, plus the compile-race probe with flex on CUDA. Runs all four at once, each bounded
# by `timeout`; stacks of stuck runs come from faulthandler. Writes everything to ${OUT:-bench/results/gpu}.
set -u
OUT=${OUT:-bench/results/gpu}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_FORCE_DISABLE_CACHES=1
PY=${PY:-python3}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; $PY -c 'import torch, torch._functorch.config as f, sys; print("torch", torch.__version__, "python", sys.version.split()[0], "cuda", torch.cuda.is_available(), "force_non_lazy_backward_lowering" , hasattr(f, "force_non_lazy_backward_lowering"))'; nproc; } > "$OUT/env.txt" 2>&1
run() {  # name, limit, command...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout -s KILL "$limit" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc wall_s=$((SECONDS - t0))" >> "$OUT/summary.txt"
}
run trainer_noguard 150 $PY -m dfdoctor.trainer --preset gpu --no-compile-guard --out /tmp/ng --dump-stacks-after 120 &
run trainer_guard 300 $PY -m dfdoctor.trainer --preset gpu --out /tmp/g &
run probe_flex_noguard 100 env DFDOCTOR_PROBE_OUT="$OUT/probe_flex_noguard.json" $PY checks/probes/compile_race_probe.py --backend flex --device cuda --threads 4 --steps 2 --deadline 90 &
run probe_flex_guard 300 env DFDOCTOR_PROBE_OUT="$OUT/probe_flex_guard.json" $PY checks/probes/compile_race_probe.py --backend flex --device cuda --threads 4 --steps 2 --guard --deadline 290 &
wait
cat "$OUT/env.txt" "$OUT/summary.txt"
