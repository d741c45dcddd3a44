#!/bin/bash
# Round 15 on a real GPU: round 12's three jobs again on today's build (issue 41's "running is earned" on a GPU:
# a kernel that never ends, a silent max-autotune compile, a rank that never joins), then the seed's own check of
# the reference trainer with flex_attention in 4 drafter threads (compile.race on CUDA: the silent deadlock).
# Usage there:  OUT=/some/dir bash bench/gpu_round15.sh   (under 9 minutes)
set -u
OUT=${OUT:?set OUT to a folder}; mkdir -p "$OUT"
cd "$(dirname "$0")/.."
OUT="$OUT" timeout 420 bash bench/gpu_round12.sh
exec > >(tee -a "$OUT/gpu_round15_check.txt") 2>&1
echo "== the trainer's check on the GPU"
W=$(mktemp -d /tmp/round15.XXXXXX)
t0=$SECONDS
timeout 150 dfdoctor check --cwd "$W" --format json --output "$OUT/trainer_check.json" --format text -- \
  python3 -m dfdoctor.trainer --preset gpu --out "$W/out"
echo "check exit $? after $((SECONDS - t0)) s"
