#!/usr/bin/env bash
# Re-measures the CPU timings docs/trainer.md quotes ("~30-60 s on 2 cores" for the tiny trainer, "~15 s" for the
# FX race) on a quiet machine, pinned to 2 cores (taskset -c 0,1) as the docs say, twice each, one at a time.
# Run from the repo root where plain `python3` has torch; writes $OUT/doc_timings.txt (and each run's log).
# The H200 figures of docs/cuda.md are re-measured by bench/cuda_device_run.sh, those of docs/trainer.md by
# bench/gpu_trainer.sh. This machine (2 shared cores, load 5-8 from seven sessions) cannot time anything fairly.
set -u
OUT=${OUT:-bench/results/doc_timings}; mkdir -p "$OUT"
PY=${PY:-python3}
"$PY" -m pip install -q --no-deps --no-build-isolation --no-index -e . > "$OUT/install.log" 2>&1 || true
CORES=${CORES:-0,1}
{ echo "python: $("$PY" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)')";
  echo "cores: taskset -c $CORES of $(nproc)"; uptime; } > "$OUT/doc_timings.txt" 2>&1
run() {  # name, limit, command...
  local name=$1 limit=$2; shift 2
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout -s KILL "$limit" taskset -c "$CORES" "$@" > "$OUT/$name.log" 2>&1; rc=$?
  t1=$(date +%s.%N)
  printf '%s rc=%s wall_s=%.1f\n' "$name" "$rc" "$(echo "$t1 - $t0" | bc)" >> "$OUT/doc_timings.txt"
}
for i in 1 2; do
  run "trainer_tiny_$i" 180 "$PY" -m dfdoctor.trainer --out "/tmp/doc_timings_tiny_$i"
  run "trainer_race_noguard_$i" 120 "$PY" -m dfdoctor.trainer --preset race --no-compile-guard \
      --out "/tmp/doc_timings_race_$i"
done
cat "$OUT/doc_timings.txt"
