"""How fast the flight recorder masks a job's output stream (the cost of keeping masked stream copies).

The recorder masks its copies of the job's stdout/stderr line by line with the rules of every output
(doctor/redact.py). This feeds the recorder's own CappedCopy (masker on, then off) with output of the shapes
training jobs print: progress lines, a warning, a traceback, a config dump with a token in it; and reports MB/s.

    .venv/bin/python bench/redact_stream.py --mb 16 --out bench/results/redact_stream.json
    .venv/bin/python bench/redact_stream.py --mb 16 --before REV   # also REV's rules, side by side, same data
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
import types

from dfdoctor.agent import record

LINES = [
    "step {i} | loss 2.3456 | lr 3.0e-04 | tokens/s 12345.6 | grad_norm 0.98 | elapsed 00:12:34\n",
    "[rank0]: epoch 1 batch {i}/10000 acc 0.913 ppl 10.4\n",
    "/usr/lib/python3/site-packages/torch/nn/modules/module.py:1511: UserWarning: step {i}\n",
    '  File "/workspace/dflash/train.py", line {i}, in forward\n',
    "config: model=dflash-small seq_len=4096 batch=32 hf_token=hf_QwErTyUiOpAsDfGhJkLzXcVbNm01234567 {i}\n",
]


def feed(masker, data: bytes, chunk: int = 65536) -> float:
    """Seconds to pass `data` through one capped copy, in pipe-sized chunks as the relay loop reads them."""
    with tempfile.TemporaryDirectory() as d:
        copy = record.CappedCopy(d, "stdout", masker)
        t = time.perf_counter()
        for i in range(0, len(data), chunk):
            copy.write(data[i:i + chunk])
        copy.tick(final=True)
        return time.perf_counter() - t


def _rules_at(rev: str) -> types.ModuleType:
    """The masking rules as they were at git revision `rev` (doctor/agent/mask.py, before it doctor/redact.py)."""
    for path in ("doctor/agent/mask.py", "doctor/redact.py"):
        got = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True)
        if got.returncode == 0:
            module = types.ModuleType("rules_before")
            exec(compile(got.stdout, path, "exec"), module.__dict__)
            return module
    raise SystemExit(f"no masking rules at {rev}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=16)
    ap.add_argument("--out")
    ap.add_argument("--before", help="a git revision: also mask with its rules (doctor/agent/mask.py), in the same run")
    ap.add_argument("--rounds", type=int, default=3, help="each measured this many times; the best kept")
    ap.add_argument("--no-secrets", action="store_true",
                    help="only the progress and warning lines: a log that names no secret")
    args = ap.parse_args()
    text, i = [], 0
    size = 0
    while size < args.mb * 2**20:
        shapes = LINES[:3] if args.no_secrets else LINES
        line = shapes[i % len(shapes)].format(i=i)
        text.append(line)
        size += len(line)
        i += 1
    data = "".join(text).encode()
    argv = ["python", "train.py", "--hf-token", "hfcli-9f8e7d6c5b4a"]
    env = {"WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567", "PATH": os.defpath}
    maskers = {"masked": record.Masker(argv, env)}
    if args.before:
        maskers["masked_before"] = record.Masker(argv, env)
        maskers["masked_before"].redactor = _rules_at(args.before).Redactor.from_env(env)
        maskers["masked_before"].redactor.learn_argv(argv)
        # the same bytes out of both: a faster rule set that masks differently is no speed-up
        assert maskers["masked"].data(data) == maskers["masked_before"].data(data), "the two rule sets differ"
    maskers["plain"] = None
    best = {name: min(feed(m, data) for _ in range(args.rounds)) for name, m in maskers.items()}
    result = {"bytes": len(data), "lines": len(text), "rounds": args.rounds,
              "command": "python bench/redact_stream.py --mb %g" % args.mb
                         + (f" --before {args.before}" if args.before else "")
                         + (" --no-secrets" if args.no_secrets else "")}
    for name, secs in best.items():
        result[f"{name}_s"] = round(secs, 3)
        result[f"{name}_mb_per_s"] = round(len(data) / 2**20 / secs, 1)
    if args.before:
        result["speed_up"] = round(best["masked_before"] / best["masked"], 2)
    print(json.dumps(result, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
