#!/bin/bash
# One batched run of the GPU checks on a real GPU machine (the `device` tool's nvidia-h200), for issue 5.
# Writes at most 7 files into $OUT (the tool brings back 8): the JSON of each scenario, the timing, one log.
# Usage there:  OUT=/some/dir bash bench/cuda_device_run.sh
#   SCENARIOS="ok cvd7 ..." picks scenarios (default: the one-GPU set), ROUNDS=N timing rounds (0: no timing),
#   TAG names the files (default h200). Issue 8 on two GPUs:
#   OUT=$OUT TAG=h200x2 SCENARIOS="ok cvd00 hang1 fail0" ROUNDS=0 bash bench/cuda_device_run.sh
set -u
OUT=${OUT:?set OUT to a folder}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
LOG=$OUT/cuda_device_log.txt
exec > >(tee -a "$LOG") 2>&1

echo "== machine"; date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader
python3 -c "import sys, torch; print(sys.executable, torch.__version__, torch.version.cuda, torch.cuda.device_count())"
python3 -c "import click, psutil, jinja2, packaging; print('deps ok')"

echo "== install"
if python3 -m pip install -q --no-deps --no-build-isolation -e . >/tmp/pip.log 2>&1 && command -v dfdoctor >/dev/null; then
  DFD=(dfdoctor)
else
  tail -3 /tmp/pip.log
  echo "pip install failed: using python3 -m doctor with the carried egg-info"
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
  DFD=(python3 -m doctor)
fi
"${DFD[@]}" list-checks | grep cuda

scenario() {  # name, env assignments..., -- extra args
  local name=$1; shift
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "== $name: ${envs[*]} dfdoctor check --only 'cuda*' --require-gpu $*"
  local t0=$(date +%s.%N)
  env "${envs[@]}" "${DFD[@]}" check --only 'cuda*' --require-gpu --format json --output "$OUT/cuda_${TAG:-h200}_$name.json" \
      --format text "$@"
  echo "exit code $? after $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s"
}

want() { [[ " ${SCENARIOS:-ok cvd7 cvd_badgpu cvd00 nccl_ws2} " == *" $1 "* ]]; }
want ok && scenario ok --
want cvd7 && scenario cvd7 CUDA_VISIBLE_DEVICES=7 --
want cvd_badgpu && scenario cvd_badgpu CUDA_VISIBLE_DEVICES=GPU-00000000-bad --
want cvd00 && scenario cvd00 CUDA_VISIBLE_DEVICES=0,0 --
want nccl_ws2 && scenario nccl_ws2 DFDOCTOR_NCCL_WORLD_SIZE=2 -- --timeout 60
want hang1 && scenario hang1 DFDOCTOR_NCCL_HANG_RANK=1 -- --timeout 40
want fail0 && scenario fail0 DFDOCTOR_NCCL_FAIL_RANK=0 -- --timeout 60

echo "== left behind (should be none)"
ps -eo pid,ppid,etimes,cmd | grep -E "cuda_(init|nccl)_probe" | grep -v grep || echo none

if [ "${ROUNDS:-5}" -gt 0 ]; then
  echo "== speed"
  python3 bench/cuda_check_speed.py --rounds "${ROUNDS:-5}" --python "$(command -v python3)" --out "$OUT/cuda_speed.json"
fi
echo "== done"; date -u
