"""Data files the suite's jobs read that only torch writes (torch.save), all made by one interpreter, which imports
torch once per run of the suite, the first time a test asks for any of them (`support.made_once`: shared by the
xdist workers). Each file had its own interpreter before, one per test file that needed one: an import of torch,
~1.2-1.4 CPU-s each, proving nothing about dfdoctor. Tests copy a file into their job's folder; none writes here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.made_once import made_once

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
# Each file: the code that writes it, run in the data folder with torch imported. Tensors are drawn after
# torch.manual_seed(0), so each file has the same bytes whichever files are made before it.
_MAKE = {
    # pytorch/examples time_sequence_prediction's traindata.pt, as its README makes it: its own generate_sine_wave.py
    # (unmodified, copied from tests/corpus) run in the folder it writes into; it seeds numpy, not torch
    "sine/traindata.pt": "runpy.run_path('generate_sine_wave.py', run_name='__main__')",
    # the hydra lookalike's TinyData (and the launcher-script lookalike's): 64 rows of 8 features, a 0/1 label
    "tiny/train.pt": "torch.save({'x': torch.randn(64, 8), 'y': torch.randint(0, 2, (64,))}, 'train.pt')",
    # the val-split lookalike: 100 rows of 4 features and a target
    "val-split/train.pt": "torch.save({'x': torch.randn(100, 4), 'y': torch.randn(100)}, 'train.pt')",
}
_SCRIPT = """import os, runpy, sys
import torch
for folder, code in zip(sys.argv[1::2], sys.argv[2::2]):
    os.chdir(folder)
    torch.manual_seed(0)
    exec(code)
"""


def _make_all(where: Path) -> None:
    args = []
    for name, code in _MAKE.items():
        folder = where / Path(name).parent
        folder.mkdir(parents=True, exist_ok=True)
        args += [str(folder), code]
    (where / "sine" / "generate_sine_wave.py").write_bytes(
        (CORPUS / "pytorch-examples-time_sequence_prediction" / "generate_sine_wave.py").read_bytes())
    subprocess.run([sys.executable, "-c", _SCRIPT, *args], check=True, capture_output=True, timeout=120)


def torch_data(session: Path, name: str) -> Path:
    """The file `name` (a key of `_MAKE`), made with all the others once per run of the suite under `session`
    (`made_once.session_folder`)."""
    path = made_once(session / "torch-data", _make_all) / name
    assert path.is_file(), f"{path} was not made"
    return path
