#!/usr/bin/env bash
# One batched H200 call for issues 16 and 12.2 (device tool, repo root, py-spy carried as .venv/bin/py-spy):
#   OUT=$OUT bash bench/gpu_guard.sh
# A (in parallel): the user-shaped flex_attention script unguarded x3 and with dfdoctor.guard x5
#   (bench/user_threads.py), `dfdoctor check --only compile.race` on issue 12's repro and on its fixed variant.
# B (in parallel): launch's time from the lock cycle forming to its compile-deadlock verdict
#   (bench/deadlock_latency.py on bench/issue12_flex.py), and warm-step throughput unguarded vs guarded.
set -u
OUT=${OUT:?set OUT}; W=/tmp/gg; mkdir -p $W
export PYTHONUNBUFFERED=1 PATH=$PWD/.venv/bin:$PATH NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
PY=python3
{ date -u; git log --oneline -1; ls doctor/guard.py; command -v py-spy; nvidia-smi -L
  $PY -c "import torch; print(torch.__version__, torch.cuda.get_device_name())"; } > $W/env.txt 2>&1
$PY -m pip install -q --no-deps --no-build-isolation --no-index -e . > $W/pip.log 2>&1 || echo "pip failed" >> $W/env.txt
$PY -c "import dfdoctor.guard as g; print('guard', g.__file__, g.proven_here())" >> $W/env.txt 2>&1
run() {  # name, limit, command...
  local name=$1 limit=$2; shift 2; local t0=$SECONDS
  timeout -s KILL "$limit" "$@" > "$W/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc wall_s=$((SECONDS - t0))" >> "$W/summary.txt"
}
U="$PY bench/user_threads.py --device cuda --model flex --deadline 150"
for i in 1 2 3; do run unguarded_$i 200 $U & done
for i in 1 2 3 4 5; do run guarded_$i 200 $U --guard & done
run check_issue12 240 $PY -m dfdoctor check --only compile.race --format json --output $W/check_issue12.json \
  --format text -- $PY bench/issue12_flex.py &
run check_issue12_guarded 240 $PY -m dfdoctor check --only compile.race --format json \
  --output $W/check_issue12_guarded.json --format text -- $PY bench/issue12_flex_guarded.py &
wait
run latency 240 $PY bench/deadlock_latency.py --out $W/deadlock_latency.json --watch 200 -- $PY bench/issue12_flex.py &
run throughput 200 $U --guard --throughput --rounds 6 --steps-per-round 30 &
wait
cat $W/summary.txt
for f in $W/unguarded_*.log $W/guarded_*.log $W/throughput.log; do echo "$(basename $f): $(grep -h '^{' $f | cut -c1-400)"; done
cat $W/latency.log
grep -h '"status"\|"summary"' $W/check_issue12*.json | head -8
tar czf "$OUT/gpu_guard.tgz" -C $W .
cp $W/summary.txt $W/deadlock_latency.json $W/check_issue12.json $W/check_issue12_guarded.json "$OUT/" 2>/dev/null
