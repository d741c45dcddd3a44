"""Trains, then writes its weights with a plain open(path, 'wb') into --out-dir (default out/run1), a folder nobody
made: `output-dir-missing`, with the folder, not `crashed` and not an input that is missing."""
import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--out-dir", default="out/run1")
args = parser.parse_args()
print("step 1 loss 0.5", flush=True)
with open(os.path.join(args.out_dir, "model.bin"), "wb") as f:
    f.write(b"\0" * 16)
