#!/bin/bash
# Issue 12 sections 3-4 on a real GPU (the `device` tool's nvidia-h200, one GPU): dfdoctor launch on a CUDA OOM
# (with a second process holding memory), a device-side assert, an illegal memory access, a kernel built for
# another architecture, and `torchrun --nproc_per_node 2 ddp.py` on one GPU. Writes each verdict's JSON and one
# log into $OUT (at most 8 files).  Usage there:  OUT=/some/dir bash bench/gpu_runtime.sh
set -u
OUT=${OUT:?set OUT to a folder}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NO_COLOR=1
exec > >(tee -a "$OUT/gpu_runtime_log.txt") 2>&1
J=$PWD/bench/gpu_jobs
W=/tmp/gpu_runtime; mkdir -p $W

echo "== machine"; date -u; nvidia-smi -L
python3 -c "import sys, torch; print(sys.executable, torch.__version__, torch.version.cuda, torch.cuda.device_count(), torch.cuda.get_arch_list())"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/tmp/pip.log 2>&1 || tail -3 /tmp/pip.log

verdict() {  # name, then the command; launch, wait for the job's end, keep status's JSON
  local name=$1; shift
  echo "== $name: dfdoctor launch --no-check --watch 60 -- $*"
  local t0=$(date +%s.%N)
  dfdoctor launch --no-check --cwd $W --log $W/$name.log --watch 60 --format json --output $W/$name.launch.json \
    --format text -- "$@" | head -12
  local run; run=$(python3 -c "import json; print(json.load(open('$W/$name.launch.json'))['run']['dir'])")
  for _ in $(seq 1 90); do
    python3 -c "import sys, pathlib; from dfdoctor.run import record; sys.exit(not record.load(pathlib.Path('$run')).finished)" && break
    sleep 1
  done
  dfdoctor status --cwd $W "$(basename "$run")" --format json --output "$OUT/gpu_$name.json" --format text
  echo "exit code $? after $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
}

python3 $J/hold_gpu.py 24 > $W/hold.log 2>&1 & HOLD=$!
for _ in $(seq 1 60); do grep -q holding $W/hold.log && break; sleep 0.5; done
verdict oom python3 $J/cuda_oom.py
kill $HOLD; wait $HOLD 2>/dev/null

verdict torchrun_2_on_1 torchrun --nproc_per_node 2 $J/ddp.py
verdict assert python3 $J/cuda_assert.py
verdict illegal python3 $J/cuda_illegal.py
printf 'extern "C" __global__ void k(float* p) { p[0] = 1.0f; }\n' > $W/k.cu
nvcc --cubin -arch=sm_80 -o $W/k_sm80.cubin $W/k.cu && verdict no_kernel_image python3 $J/no_kernel_image.py $W/k_sm80.cubin
date -u
