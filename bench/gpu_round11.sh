#!/bin/bash
# Round 11 on a real GPU: a default local `check` (every check, the not_applicable skips and the reused deps
# answer among them), a launch to its verdict, and `check` against `import torch` side by side (paired rotations).
# Usage there:  OUT=/some/dir bash bench/gpu_round11.sh      (writes gpu_round11.txt and gpu_round11_check.json)
set -u
OUT=${OUT:?set OUT to a folder}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_round11.txt") 2>&1
echo "== machine"; date -u; nvidia-smi -L
python3 -c "import sys, torch; print(sys.executable, torch.__version__, torch.version.cuda, torch.cuda.device_count())"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/tmp/pip.log 2>&1 || { tail -3 /tmp/pip.log; exit 1; }
P=$(mktemp -d); cd "$P"
printf 'import torch\nimport helper\nx = torch.ones(4, device="cuda")\nprint("sum", x.sum().item(), flush=True)\n' > train.py
echo "x = 1" > helper.py
echo "== check -v (cold cache, then warm)"
dfdoctor check -v -- python3 train.py; echo "exit $?"
dfdoctor check -v --format json --output "$OUT/gpu_round11_check.json" --format text -- python3 train.py; echo "exit $?"
echo "== launch"
dfdoctor launch --watch 8 -- python3 -u train.py; echo "exit $?"
echo "== paired: check vs import torch (wall s, cpu s)"
python3 - <<'PY'
import resource, statistics, subprocess, time
def timed(argv):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN); t0 = time.monotonic()
    subprocess.run(argv, capture_output=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.monotonic() - t0, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
rows = {"import torch": ["python3", "-c", "import torch"], "check": ["dfdoctor", "check", "--", "python3", "train.py"]}
got = {k: [] for k in rows}
for i in range(10):
    for k in (list(rows) if i % 2 else list(rows)[::-1]):
        w, c = timed(rows[k])
        if i:
            got[k].append((w, c))
t = got["import torch"]
for k, xs in got.items():
    print(k, "wall", round(statistics.median(x[0] for x in xs), 3), "cpu", round(statistics.median(x[1] for x in xs), 3),
          "paired wall", round(statistics.median(a[0] / b[0] for a, b in zip(xs, t)), 3),
          "paired cpu", round(statistics.median(a[1] / b[1] for a, b in zip(xs, t)), 3))
PY
