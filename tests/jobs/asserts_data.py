"""Checks its data with a bare assert, as many public trainers do: `assert os.path.exists(path)` on a path built
from --data-dir (default data/shakespeare) and a file name. The AssertionError names no path: the verdict must,
with the option that sets it (`input-missing`)."""
import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--data-dir", default="data/shakespeare")
parser.add_argument("--split", default="train")


def load(args):
    path = os.path.join(args.data_dir, f"{args.split}.bin")
    assert os.path.exists(path)
    return open(path, "rb").read()


if __name__ == "__main__":
    print("loading data", flush=True)
    load(parser.parse_args())
