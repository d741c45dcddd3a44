#!/bin/bash
# cuda.nccl's store watcher on a real GPU machine (the `device` tool's nvidia-h200), one batched call:
#   ws2     two NCCL ranks on one GPU: rank 1 cannot have GPU 1 and says so; rank 0 stops waiting at once
#   gloo4   four gloo ranks, rank 2 fails before init: the others name it
#   hang1   two gloo ranks, rank 1 hangs before init: named as the hung rank, nothing left running
# Also says whether this machine could host the fleet benchmark (sshd, docker, lxc).
# Usage there:  OUT=/some/dir bash bench/nccl_device_run.sh
set -u
OUT=${OUT:?set OUT to a folder}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
exec > >(tee -a "$OUT/nccl_device_log.txt") 2>&1
echo "== machine"; date -u; nvidia-smi -L; nproc; for t in sshd ssh docker lxc-start; do printf '%s: %s\n' "$t" "$(command -v $t || echo none)"; done
python3 -c "import sys, torch; print(sys.executable, torch.__version__, torch.version.cuda, torch.cuda.device_count())"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/tmp/pip.log 2>&1 || tail -3 /tmp/pip.log
scenario() {
  local name=$1; shift
  echo "== $name: $*"
  local t0; t0=$(date +%s.%N)
  env "$@" dfdoctor check --only cuda.nccl --timeout 60 --format json --output "$OUT/nccl_h200_$name.json" --format text -- python3 -c pass
  echo "exit code $? after $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s"
}
scenario ws2 DFDOCTOR_NCCL_WORLD_SIZE=2
scenario gloo4 DFDOCTOR_NCCL_BACKEND=gloo DFDOCTOR_NCCL_WORLD_SIZE=4 DFDOCTOR_NCCL_FAIL_RANK=2
scenario hang1 DFDOCTOR_NCCL_BACKEND=gloo DFDOCTOR_NCCL_HANG_RANK=1
echo "== left running:"; ps -eo pid,args | grep -c "[c]uda_nccl_probe" || true
