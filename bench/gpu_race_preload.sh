#!/bin/bash
# compile.race on a real GPU machine with the probe server's torch._dynamo preload (round 18 turned it on for CUDA
# builds after bench/gpu_preload_check.py): the check on the bundled trainer, with the probe server (preload) and
# without it (DFDOCTOR_PROBE_SERVER=0: every run a fresh interpreter), alternating. Usage there (the device tool):
#   OUT=/some/dir ROUNDS=2 bash bench/gpu_race_preload.sh
set -u
OUT=${OUT:?set OUT to a folder}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_race_preload_log.txt") 2>&1
date -u; nvidia-smi -L
python3 -c "import sys, torch; print(sys.executable, torch.__version__, torch.version.cuda, torch.cuda.device_count())"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/tmp/pip.log 2>&1 || { tail -3 /tmp/pip.log; exit 1; }
export XDG_CACHE_HOME=$(mktemp -d)  # compile.race's 7-day cache: every run below reproduces afresh
line=(python3 -u -m dfdoctor.trainer --preset tiny --target-steps 3000 --out /tmp/ckpt)
for r in $(seq "${ROUNDS:-2}"); do
  for mode in server fresh; do
    rm -rf "$XDG_CACHE_HOME"/*
    if [ $mode = fresh ]; then export DFDOCTOR_PROBE_SERVER=0; else unset DFDOCTOR_PROBE_SERVER; fi
    t0=$(date +%s.%N)
    dfdoctor check --only compile.race --format json --output "$OUT/race_${mode}_$r.json" --format text -- "${line[@]}"
    echo "== round $r $mode: exit $? after $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s"
  done
done
echo "== left behind (should be none)"; ps -eo pid,ppid,etimes,cmd | grep -E "probe|dfdoctor" | grep -v grep || echo none
date -u
