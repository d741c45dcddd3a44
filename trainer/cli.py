"""`python -m dfdoctor.trainer`: command-line options over the presets."""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from .config import PRESETS, preset
from .guard import GUARDS


def parse(argv: Optional[list[str]] = None) -> argparse.Namespace:
    """Parse the trainer's options."""
    p = argparse.ArgumentParser(
        prog="python -m dfdoctor.trainer",
        description="Train DFlash-style block-diffusion drafters (flex_attention + block mask, torch.compile) "
                    "in several threads of one process, against a small frozen target model.")
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny",
                   help="tiny: CPU, trains in about a minute; race: CPU, shows the crash with --no-compile-guard; "
                        "gpu: a bigger model on CUDA with flex_attention (default: tiny)")
    p.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: the preset's)")
    p.add_argument("--drafters", type=int, help="drafter threads, each compiling its own model")
    p.add_argument("--steps", type=int, help="training steps per drafter")
    p.add_argument("--target-steps", type=int, help="steps to pretrain the target before freezing it")
    p.add_argument("--seq-lens", help="comma-separated length buckets, e.g. 32,64 (each compiles once)")
    p.add_argument("--batch", type=int)
    p.add_argument("--attention", choices=("auto", "flex", "sdpa"),
                   help="auto: flex_attention on CUDA, the same block mask through SDPA on CPU")
    p.add_argument("--backend", help="torch.compile backend (default: inductor); fx-race-window widens the "
                                      "race window so --no-compile-guard crashes on CPU within seconds")
    p.add_argument("--no-compile", action="store_true", help="train eagerly")
    p.add_argument("--compile-guard", choices=GUARDS, dest="guard",
                   help="how concurrent compiles are made safe (default: exclusive-compile)")
    p.add_argument("--no-compile-guard", action="store_const", const="off", dest="guard",
                   help="compile with no guard: reproduces the concurrent-compile crash (CPU) or deadlock (GPU)")
    p.add_argument("--out", help="checkpoint folder (default: runs/trainer)")
    p.add_argument("--seed", type=int)
    p.add_argument("--dump-stacks-after", type=float, metavar="S",
                   help="write every thread's stack to stderr after S seconds (to see a silent hang)")
    return p.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    """Build the config and run."""
    a = parse(argv)
    seq_lens = tuple(int(x) for x in a.seq_lens.split(",")) if a.seq_lens else None
    cfg = preset(a.preset, device=a.device, drafters=a.drafters, steps=a.steps, target_steps=a.target_steps,
                 seq_lens=seq_lens, batch=a.batch, attention=a.attention, backend=a.backend,
                 compile=False if a.no_compile else None, guard=a.guard, out=a.out, seed=a.seed)
    from .train import main_for  # imports torch: after --help has had its chance
    return main_for(cfg, a.dump_stacks_after)


if __name__ == "__main__":
    sys.exit(main())
