"""args.paths (issue 43 item 2): the paths the command gives the code, and the log folder it names, looked at
before the launch, on a real project folder, through the real `dfdoctor check`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dfdoctor import Status, causes
from dfdoctor.checks.args_paths import args_paths
from dfdoctor.context import Context

PY = sys.executable
TRAIN = """\
import argparse
import json
import logging
import os

{log}
p = argparse.ArgumentParser()
p.add_argument("--data", default="data/x.jsonl")
p.add_argument("--config", default="configs/base.yaml")
p.add_argument("--data-dir", default="shards")
p.add_argument("--epochs", type=int, default=1)
args = p.parse_args()
cfg = open(args.config).read()
rows = [json.loads(line) for line in open(args.data)]
shard = open(os.path.join(args.data_dir, "train.bin"), "rb")
"""


def proj(tmp_path: Path, log: str = "") -> Path:
    (tmp_path / "train.py").write_text(TRAIN.format(log=log))
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "small.yaml").write_text("lr: 1\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "shards").mkdir()
    return tmp_path


def run(tmp_path: Path, *args: str):
    ctx = Context(command=[PY, "train.py", *args], cwd=tmp_path, python=PY, env={}, timeout=10)
    return list(args_paths.run(ctx))


def test_a_missing_data_file_and_a_mistyped_config_are_named_with_the_file_that_exists(tmp_path: Path) -> None:
    results = run(proj(tmp_path), "--data", "data/train.jsonl", "--config", "configs/small.yml")
    by_flag = {r.summary.split()[0]: r for r in results}
    # both are opened at module level with nothing before them that branches: proved read on every run (issue 43
    # d), so they fail (tests/test_gate_round3.py has the reads that stay warnings)
    assert {r.status for r in results} == {Status.FAIL} and {r.cause for r in results} == {causes.INPUT_MISSING}
    assert "--data data/train.jsonl: no such file" in by_flag["--data"].summary
    assert "did you mean configs/small.yaml?" in by_flag["--config"].summary
    assert "Pass --config configs/small.yaml (that file exists)" in by_flag["--config"].fix
    assert "train.py:13" in by_flag["--config"].evidence[0]


def test_a_folder_the_code_joins_a_file_into_and_paths_that_exist(tmp_path: Path) -> None:
    p = proj(tmp_path)
    (p / "data" / "train.jsonl").write_text("{}\n")
    (r,) = run(p, "--data", "data/train.jsonl", "--config", "configs/small.yaml", "--data-dir", "shardz")
    assert r.summary.startswith("--data-dir shardz: no such folder") and "did you mean shards?" in r.summary
    assert "joined with 'train.bin'" in r.evidence[0]
    (r,) = run(p, "--data", "data/train.jsonl", "--config", "configs/small.yaml")
    assert r.status is Status.OK


def test_a_path_passed_to_a_function_of_the_script_is_followed_to_its_open(tmp_path: Path) -> None:
    """karpathy/makemore: `create_datasets(args.input_file)`, then `open(input_file)` inside it; `-i name.txt`
    (the file is names.txt) passed check with "the command gives no option the code opens as a file"."""
    (tmp_path / "names.txt").write_text("emma\nolivia\n")
    (tmp_path / "train.py").write_text(
        "import argparse\n\n\ndef create_datasets(input_file, split=0.1):\n    with open(input_file, 'r') as f:\n"
        "        return f.read().splitlines()\n\n\nif __name__ == '__main__':\n"
        "    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--input-file', '-i', type=str, default='names.txt')\n"
        "    args = parser.parse_args()\n    words = create_datasets(args.input_file)\n")
    (r,) = run(tmp_path, "-i", "name.txt")
    assert r.status in (Status.WARN, Status.FAIL) and r.cause == causes.INPUT_MISSING, r.summary
    # said with the flag as typed (`-i`), and its long name in the evidence
    assert r.summary.startswith("-i name.txt: no such file") and "did you mean names.txt?" in r.summary
    assert "the value of --input-file (-i)" in r.evidence[0], r.evidence
    (r,) = run(tmp_path, "-i", "names.txt")
    assert r.status is Status.OK, r.summary


def test_a_log_the_code_opens_in_a_missing_folder_gets_a_relative_makedirs(tmp_path: Path) -> None:
    p = proj(tmp_path, log='logging.basicConfig(filename="logs/train.log", level=logging.INFO)')
    (r,) = [r for r in run(p, "--config", "configs/small.yaml", "--data", "configs/small.yaml")
            if r.status is not Status.OK]
    assert (r.status, r.cause) == (Status.WARN, causes.LOG_DIR_MISSING)
    assert "train.py:6 logs to logs/train.log" in r.summary
    assert "os.makedirs('logs', exist_ok=True)" in r.fix and "mkdir -p logs" in r.fix
    # the code that creates the folder first is not warned about
    (p / "train.py").write_text(TRAIN.format(log='os.makedirs("logs", exist_ok=True)\n'
                                                'logging.basicConfig(filename="logs/train.log")'))
    assert all(r.status is Status.OK for r in run(p, "--config", "configs/small.yaml", "--data",
                                                    "configs/small.yaml"))


def test_check_names_them_before_the_launch(dfdoctor, tmp_path: Path) -> None:
    p = proj(tmp_path)
    res = dfdoctor("check", "--only", "args.paths", "--format", "json", "--", PY, "train.py", "--config",
                   "configs/small.yml", cwd=p)
    doc = json.loads(res.stdout)
    (chk,) = [c for c in doc["checks"] if c["id"] == "args.paths"]
    assert chk["status"] == "fail" and "did you mean configs/small.yaml?" in chk["summary"]
