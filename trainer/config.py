"""Run settings and the named presets (`tiny` for a CPU demo, `gpu` for a real GPU run)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Config:
    """Everything one training run needs to know."""

    device: str = "cpu"
    attention: str = "auto"         # auto: flex_attention on CUDA, the same mask through SDPA on CPU
    compile: bool = True
    backend: str = "inductor"
    guard: str = "exclusive-compile"
    drafters: int = 3
    target_dim: int = 64
    target_layers: int = 2
    target_steps: int = 120
    dim: int = 64
    heads: int = 4
    layers: int = 1
    block: int = 4
    seq_lens: tuple[int, ...] = (32, 64)  # buckets cycled during training: each one compiles once
    batch: int = 16
    steps: int = 150
    lr: float = 3e-3
    log_every: int = 25
    # torch's intra-op threads on a CPU (0: torch's default, one per core). These models are tiny: an op gains
    # nothing from a team of threads, and a team stalls whenever another process holds a core (measured, 2-core
    # machine at load 7: 25 target steps in 15 s with torch's 2 threads, 300 in 9 s with 1). OMP_NUM_THREADS, when
    # set, wins.
    cpu_threads: int = 1
    ckpt_every: int = 50
    seed: int = 0
    out: str = "runs/trainer"

    def resolved_attention(self) -> str:
        """flex or sdpa: flex_attention has no backward on CPU in torch 2.13, so auto means sdpa there."""
        if self.attention != "auto":
            return self.attention
        return "flex" if self.device.startswith("cuda") else "sdpa"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings (saved in every checkpoint)."""
        return asdict(self)


PRESETS: dict[str, Config] = {
    "tiny": Config(),
    # CPU, made to show the race: every lazy backward compile traces (fx-race-window), 4 drafters, 7 buckets
    "race": Config(backend="fx-race-window", drafters=4, target_steps=20, seq_lens=(16, 24, 32, 40, 48, 56, 64),
                   steps=70),
    "gpu": Config(device="cuda", drafters=4, target_dim=256, target_layers=4, target_steps=300, dim=256,
                  heads=8, layers=2, block=8, seq_lens=(128, 256), batch=16, steps=100, lr=1e-3,
                  log_every=20, ckpt_every=100),
}


def preset(name: str, **overrides: Any) -> Config:
    """A preset with the given fields replaced (None values are ignored)."""
    return replace(PRESETS[name], **{k: v for k, v in overrides.items() if v is not None})
