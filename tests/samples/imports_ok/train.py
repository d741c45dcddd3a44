"""A healthy drafter script: imports torch, a local module and one from src/ (added to sys.path)."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

import model  # noqa: E402
from blocks import DraftBlock  # noqa: E402

try:
    import wandb_not_installed_here  # noqa: F401
except ImportError:
    wandb_not_installed_here = None


def main() -> None:
    """The body: must never run during dfdoctor's check."""
    Path(os.environ["DFDOCTOR_SAMPLE_MARKER"]).write_text("the main body ran")


if __name__ == "__main__":
    main()
