"""The training run: pretrain and freeze the target, then train several drafters in threads of one process."""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Optional

import torch

from dfdoctor.agent.atomic import replace_atomically

from . import guard as guard_mod
from .backends import resolve_backend
from .config import Config
from .data import Vocab, generate_corpus
from .model import Drafter, TargetLM, build_mask

_PRINT_LOCK = threading.Lock()


def log(msg: str) -> None:
    """One timestamped line to stdout, flushed at once so a redirected log grows while we work."""
    with _PRINT_LOCK:
        print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


def save_atomic(obj: object, path: Path) -> None:
    """torch.save to a temporary file, then rename: a crash never leaves half a checkpoint."""
    replace_atomically(path, lambda f: torch.save(obj, f), binary=True)


def median(xs: list[float]) -> float:
    """The middle value (the upper one of an even count); 0 for none."""
    return sorted(xs)[len(xs) // 2] if xs else 0.0


class Batches:
    """Random windows of the encoded corpus; each thread owns one, seeded on its own."""

    def __init__(self, data: torch.Tensor, batch: int, seed: int, device: str):
        self.data, self.batch, self.device = data, batch, device
        self.rng = random.Random(seed)

    def get(self, length: int) -> torch.Tensor:
        """A (batch, length) tensor of token ids."""
        starts = [self.rng.randrange(0, len(self.data) - length) for _ in range(self.batch)]
        return torch.stack([self.data[s:s + length] for s in starts]).to(self.device)


def train_target(cfg: Config, vocab: Vocab, data: torch.Tensor) -> TargetLM:
    """Train the target briefly (eager, one thread) so its hidden states mean something, then freeze it."""
    torch.manual_seed(cfg.seed)
    target = TargetLM(vocab.size, cfg.target_dim, cfg.heads, cfg.target_layers, max(cfg.seq_lens) + 1)
    target.to(cfg.device)
    opt = torch.optim.AdamW(target.parameters(), lr=cfg.lr)
    batches = Batches(data, cfg.batch, cfg.seed, cfg.device)
    for step in range(1, cfg.target_steps + 1):
        loss = target.loss(batches.get(max(cfg.seq_lens) + 1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % cfg.log_every == 0 or step == cfg.target_steps:
            log(f"target step {step}/{cfg.target_steps} loss {loss.item():.4f}")
    target.eval().requires_grad_(False)
    return target


def train_drafter(index: int, cfg: Config, target: TargetLM, vocab: Vocab, data: torch.Tensor,
                  start: threading.Barrier, out: Path, results: dict) -> None:
    """One drafter thread: compile its loss, train over the length buckets, log and checkpoint."""
    name = f"drafter-{index}"
    guard_mod.apply_compile_guard(cfg.guard)  # per thread: torch >= 2.13 keeps config per thread
    torch.manual_seed(cfg.seed + 1 + index)
    attention = cfg.resolved_attention()
    drafter = Drafter(vocab.size, cfg.target_dim, cfg.dim, cfg.heads, cfg.layers, cfg.block, vocab.mask_id,
                      attention).to(cfg.device)
    opt = torch.optim.AdamW(drafter.parameters(), lr=cfg.lr)
    # static shapes: one compiled graph per length bucket, as the reference pipeline (docs/trainer.md) has
    step_fn = (torch.compile(drafter.loss, backend=resolve_backend(cfg.backend), dynamic=False)
               if cfg.compile else drafter.loss)
    masks = {n: build_mask(attention, n, cfg.block, cfg.device) for n in cfg.seq_lens}
    batches = Batches(data, cfg.batch, cfg.seed + 100 + index, cfg.device)
    losses: list[float] = []
    step_s: list[float] = []
    start.wait()  # the drafters start together, as in the reference pipeline
    t0 = time.monotonic()
    for step in range(1, cfg.steps + 1):
        n = cfg.seq_lens[(step - 1) % len(cfg.seq_lens)]
        tokens = batches.get(n + 1)
        t_step = time.monotonic()
        with guard_mod.step_context(cfg.guard, n):
            with torch.no_grad():
                hidden = target.hidden(tokens[:, :-1])
            loss = step_fn(tokens, hidden, masks[n])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        losses.append(loss.item())
        step_s.append(time.monotonic() - t_step)
        if step == 1:
            log(f"{name} first step done in {time.monotonic() - t0:.1f}s (compiled: {cfg.compile})")
        if step % cfg.log_every == 0 or step == cfg.steps:
            log(f"{name} step {step}/{cfg.steps} len {n} loss {losses[-1]:.4f}")
        if step % cfg.ckpt_every == 0 or step == cfg.steps:
            save_atomic({"model": drafter.state_dict(), "step": step, "loss": losses[-1],
                         "config": cfg.to_dict()}, out / f"{name}.pt")
    results[index] = {"first_loss": sum(losses[:5]) / min(5, len(losses)),
                      "last_loss": sum(losses[-5:]) / min(5, len(losses)),
                      "seconds": round(time.monotonic() - t0, 2),
                      "warm_step_ms": round(1000 * median(step_s[len(step_s) // 2:]), 3)}


def run(cfg: Config) -> int:
    """The whole run; returns the process exit status (1 when any drafter failed)."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.device == "cpu" and cfg.cpu_threads > 0 and not os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(cfg.cpu_threads)  # config.py says why
    log(f"trainer starting: torch {torch.__version__}, device {cfg.device}, attention "
        f"{cfg.resolved_attention()}, compile {cfg.compile} ({cfg.backend}), guard "
        f"{cfg.guard}, {cfg.drafters} drafter threads, {torch.get_num_threads()} CPU thread(s) per op, out {out}")
    guard_mod.apply_compile_guard(cfg.guard)
    text = generate_corpus(seed=cfg.seed)
    vocab = Vocab.from_text(text)
    data = torch.tensor(vocab.encode(text), dtype=torch.long)
    target = train_target(cfg, vocab, data)
    save_atomic({"model": target.state_dict(), "config": cfg.to_dict(), "vocab": vocab.chars}, out / "target.pt")
    start = threading.Barrier(cfg.drafters)
    results: dict[int, dict] = {}
    failures: dict[int, str] = {}

    def guarded(i: int) -> None:
        """Train one drafter; record and print its traceback if it dies."""
        try:
            train_drafter(i, cfg, target, vocab, data, start, out, results)
        except BaseException:  # a dead drafter must say why, loudly, then fail the run
            failures[i] = traceback.format_exc()
            start.abort()
            with _PRINT_LOCK:
                print(f"drafter-{i} failed:\n{failures[i]}", file=sys.stderr, flush=True)

    threads = [threading.Thread(target=guarded, args=(i,), name=f"drafter-{i}") for i in range(cfg.drafters)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    summary = {"results": results, "failed": sorted(failures)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    for i, r in sorted(results.items()):
        log(f"drafter-{i} loss {r['first_loss']:.4f} -> {r['last_loss']:.4f} in {r['seconds']}s "
            f"(warm step {r['warm_step_ms']} ms)")
    if failures:
        first = failures[min(failures)].strip().splitlines()[-1]
        log(f"FAILED: {len(failures)} of {cfg.drafters} drafters died; first error: {first}")
        return 1
    log("done")
    return 0


def main_for(cfg: Config, stall_dump: Optional[float] = None) -> int:
    """Entry used by the CLI: stacks on SIGUSR1 (for dfdoctor) and optionally after a stall."""
    import faulthandler
    import signal

    faulthandler.register(signal.SIGUSR1, all_threads=True)
    if stall_dump:
        faulthandler.dump_traceback_later(stall_dump, exit=False)
    return run(cfg)
