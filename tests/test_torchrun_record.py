"""torchrun.record: a torchrun entry point without @record is warned about (a static reading never fails)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from jobs.harness import dfdoctor, job_env
from support.in_process import run_here

PLAIN = "import torch.distributed as dist\n\ndef main():\n    dist.init_process_group('gloo')\n\n" \
        "if __name__ == '__main__':\n    main()\n"
DECORATED = "from torch.distributed.elastic.multiprocessing.errors import record\n\n@record\ndef main():\n" \
            "    pass\n\nif __name__ == '__main__':\n    main()\n"
MODULE_ALIAS = "from torch.distributed.elastic.multiprocessing import errors as E\n\ndef main():\n    pass\n\n" \
               "if __name__ == '__main__':\n    E.record(main)()\n"
IMPORTED_UNUSED = "from torch.distributed.elastic.multiprocessing.errors import record  # noqa\n\ndef main():\n" \
                  "    pass\n\nif __name__ == '__main__':\n    main()\n"


def _check(tmp_path: Path, source: str, *launch: str, here: bool = False) -> dict:
    """`here`: through the same entry in this process (support/in_process), for a test's further readings."""
    (tmp_path / "train.py").write_text(source)
    args = ("check", "--only", "torchrun.record", "--cwd", str(tmp_path), "--format", "json", "--", *launch,
            "train.py")
    p = run_here(*args, cwd=tmp_path, full_env=job_env()) if here else dfdoctor(*args, cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    return next(c for c in json.loads(p.stdout)["checks"] if c["id"] == "torchrun.record")


TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]


@pytest.mark.parametrize("source,status", [(PLAIN, "warn"), (DECORATED, "ok"), (MODULE_ALIAS, "ok"),
                                           (IMPORTED_UNUSED, "warn")],
                         ids=["plain", "decorated", "module-alias", "imported-unused"])
def test_record_is_looked_for(tmp_path, source, status):
    c = _check(tmp_path, source, *TORCHRUN)
    assert c["status"] == status, c
    if status == "warn":
        assert "@record" in c["fix"] and "error_file: <N/A>" in c["summary"]


def test_torchrun_console_script_and_plain_python(tmp_path):
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    assert _check(tmp_path, PLAIN, torchrun, "--nproc_per_node", "2")["status"] == "warn"
    assert _check(tmp_path, PLAIN, sys.executable, here=True)["status"] == "skip"


def test_a_script_that_never_uses_torch_distributed_is_said_to_run_once_per_process(tmp_path):
    """pytorch/examples' gat under `torchrun --nproc_per_node 2`: nothing in it forms a group, so torchrun runs the
    whole job twice. That is the warning (with the one-process line), not @record; one process is no such case."""
    single = "import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument('--epochs')\n" \
             "args = p.parse_args()\nprint(torch.zeros(1))\n"
    c = _check(tmp_path, single, *TORCHRUN)
    assert c["status"] == "warn" and "never uses torch.distributed" in c["summary"] and "2 copies" in c["summary"], c
    assert c["fix"].startswith("Run it as one process: `python train.py`") and "not tried" in c["fix"], c["fix"]
    one = _check(tmp_path, single, sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1", here=True)
    assert "@record" in one["fix"] and "never uses" not in one["summary"], one
    (tmp_path / "dist_utils.py").write_text("import os\nrank = int(os.environ['LOCAL_RANK'])\n")
    c = _check(tmp_path, "import dist_utils\n" + single, *TORCHRUN, here=True)  # a project module reads the rank
    assert "@record" in c["fix"], c
