#!/usr/bin/env bash
# Issue 22 items 7-8 on an H200 (device tool, repo root, torch 2.11 + CUDA as plain python3):
#   OUT=$OUT bash bench/gpu_guard_round5.sh
# The round-5 guard gates torch's compiling, not whole steps. This re-proves it where round 4's gate was proven
# (flex_attention, inductor), in three shapes, and measures what it costs:
# A (in parallel, <= 230 s): bench/user_threads.py (4 threads, own model each) unguarded x3 (round 4: 3/3
#   deadlocked) and guarded x5; bench/guard_pipeline.py (a producer handing tensors to 2 consumers through a
#   bounded queue inside guarded steps, nested @compile_guard, a recompile every two batches) guarded x3, and
#   unguarded x1; `install()` alone, no per-thread settings, x2 (informative: every backward then compiles
#   lazily on the autograd device thread, which the per-thread settings exist to prevent);
#   `dfdoctor check --only compile.race` on issue 12's fixed variant (the probe runs this guard there).
# B (<= 200 s): warm-step throughput, 6 rounds x 30 steps x 4 threads, unguarded and guarded side by side in one
#   process (user_threads.py --throughput).
# 2.11 is not in dfdoctor.guard.PROVEN_TORCH until this run shows it held: DFDOCTOR_GUARD_UNPROVEN=1 here.
set -u
OUT=${OUT:?set OUT}; W=/tmp/gg5; rm -rf $W; mkdir -p $W
export PYTHONUNBUFFERED=1 PATH=$PWD/.venv/bin:$PATH NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export DFDOCTOR_GUARD_UNPROVEN=1
PY=python3
{ date -u; git log --oneline -1 2>/dev/null; nvidia-smi -L
  $PY -c "import torch; print(torch.__version__, torch.cuda.get_device_name())"; } > $W/env.txt 2>&1
$PY -m pip install -q --no-deps --no-build-isolation --no-index -e . > $W/pip.log 2>&1 || echo "pip failed" >> $W/env.txt
# which hooks this torch has (both must be True for the compile-only gate to be complete)
$PY -c "import dfdoctor.guard as g; print('guard', g.__file__, g.install(), g.proven_here())" >> $W/env.txt 2>&1
run() {  # name, limit, command...
  local name=$1 limit=$2; shift 2; local t0=$SECONDS
  timeout -s KILL "$limit" "$@" > "$W/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc wall_s=$((SECONDS - t0))" >> "$W/summary.txt"
}
U="$PY bench/user_threads.py --device cuda --model flex --deadline 170"
P="$PY bench/guard_pipeline.py --device cuda --model flex --runs 2 --deadline 190"
for i in 1 2 3; do run unguarded_$i 220 $U & done
for i in 1 2 3 4 5; do run guarded_$i 220 $U --guard & done
for i in 1 2 3; do run pipeline_guarded_$i 230 $P & done
run pipeline_unguarded_1 230 $P --no-guard &
for i in 1 2; do run install_only_$i 220 $U --install-only & done
run check_issue12_guarded 230 $PY -m dfdoctor check --only compile.race --format json \
  --output $W/check_issue12_guarded.json --format text -- $PY bench/issue12_flex_guarded.py &
wait
run throughput 200 $U --guard --throughput --rounds 6 --steps-per-round 30
cat $W/env.txt $W/summary.txt
for f in $W/unguarded_*.log $W/guarded_*.log $W/pipeline_*.log $W/install_only_*.log $W/throughput.log; do
  echo "$(basename $f): $(grep -h '^{' $f | tail -1 | cut -c1-500)"; done
grep -h '"status"\|"summary"' $W/check_issue12_guarded.json | head -4
tar czf "$OUT/gpu_guard_round5.tgz" -C $W .
cp $W/summary.txt $W/env.txt $W/check_issue12_guarded.json "$OUT/" 2>/dev/null
