#!/usr/bin/env bash
# Second batched GPU session: the trainer (default guard) twice, the flex_attention reproduction with every
# candidate fix, compile.race through dfdoctor itself, and bench/race.py with this machine's torch. All run at
# once, each bounded by `timeout`; everything lands in one archive under $OUT (the device returns few files).
set -u
OUT=${OUT:-bench/results/gpu2}; W=/tmp/gpu2; mkdir -p "$OUT" $W
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_FORCE_DISABLE_CACHES=1
PY=${PY:-python3}
$PY -m pip install -q --no-deps --no-build-isolation --no-index -e . > $W/pip.log 2>&1
run() {  # name, limit, command...
  local name=$1 limit=$2; shift 2; local t0=$SECONDS
  timeout -s KILL "$limit" "$@" > "$W/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc wall_s=$((SECONDS - t0))" >> "$W/summary.txt"
}
run trainer_guard_a 240 $PY -m dfdoctor.trainer --preset gpu --out $W/ga &
run trainer_guard_b 240 $PY -m dfdoctor.trainer --preset gpu --out $W/gb --seed 1 &
for g in exclusive-compile eager-backward step-lock thread-local-flag none; do
  for r in 1 2; do
    [ $g = none ] && [ $r = 2 ] && continue
    run probe_${g}_$r 150 env DFDOCTOR_PROBE_OUT=$W/probe_${g}_$r.json $PY checks/probes/compile_race_probe.py \
      --backend flex --device cuda --threads 4 --steps 2 --guard $g --deadline 120 &
  done
done
run check_compile_race 200 $PY -m doctor check --only compile.race --format json --output $W/check.json \
  -- $PY -m dfdoctor.trainer --no-compile-guard &
run bench_race 200 $PY bench/race.py --runs 10 --guard-runs 10 --guards none,exclusive-compile --label gpu_torch211 &
wait
cp bench/results/race_gpu_torch211.json $W/ 2>/dev/null
cat $W/summary.txt
for f in $W/probe_*.json; do $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1].split('/')[-1], d['outcome'], d['elapsed_s'], d.get('kinds'), d.get('progress'))" $f; done
grep -h "loss .* -> \|FAILED\|done$" $W/trainer_guard_*.log
tar czf "$OUT/gpu2.tgz" -C $W --exclude=ga --exclude=gb .
