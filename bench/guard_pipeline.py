"""The DFlash pipeline shape docs/guard.md pitches, under `dfdoctor.guard.compile_guard`: a producer thread
runs a compiled encoder and hands its output to consumer threads through a bounded queue, and each consumer
takes a batch and trains its own compiled model on it. Every handoff (`q.put`, `q.get`) sits inside a guarded
step, and each step calls a `@compile_guard` function that calls another (nested guards). The producer
brings a new input shape every two steps, so it compiles while consumers run warm steps or wait on the queue.

    python bench/guard_pipeline.py --runs 20                       # CPU, backend race (wide race window)
    python bench/guard_pipeline.py --guard-file /tmp/old_guard.py  # another guard module, same scenario
    python bench/guard_pipeline.py --device cuda --model flex      # the H200 shape: flex_attention, inductor

One JSON line on stdout: outcome ok | race | error | hang, runs completed, errors. Each run builds fresh models
after `torch._dynamo.reset()`, so every run compiles. A run that stops progressing is ended at --deadline: all
thread stacks go to stderr (faulthandler) and the process exits 3.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import importlib.util
import json
import os
import queue
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from user_threads import race_backend  # noqa: E402 (the CPU race window compile.race also uses)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=1, help="pipelines run one after another in this process")
    p.add_argument("--consumers", type=int, default=2)
    p.add_argument("--steps", type=int, default=6, help="batches the producer makes per run")
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", choices=("mlp", "flex"), default="mlp")
    p.add_argument("--backend", default=None, help="inductor (default on cuda) or race (default on cpu)")
    p.add_argument("--guard-file", default="", help="load compile_guard from this file, not dfdoctor.guard")
    p.add_argument("--no-guard", action="store_true", help="the same pipeline without any guard")
    p.add_argument("--deadline", type=float, default=120.0, help="seconds for all runs together")
    return p.parse_args(argv)


def load_guard(path: str):
    """dfdoctor.guard, or the guard module in `path` (an older version, to compare)."""
    if not path:
        import dfdoctor.guard as guard

        return guard
    spec = importlib.util.spec_from_file_location("guard_under_test", path)
    guard = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guard)
    return guard


def models(args: argparse.Namespace, seed: int):
    """(encoder, make_trainer, batch, sizes): the producer's compiled encoder, a maker of each consumer's
    compiled model and optimizer, a batch maker, and the input sizes the producer cycles through."""
    import torch

    torch.manual_seed(seed)
    backend = args.backend or ("inductor" if args.device != "cpu" else "race")
    backend = race_backend() if backend == "race" else backend
    dev = args.device
    if args.model == "flex":
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        sizes = (128, 256, 384)
        masks = {n: create_block_mask(lambda b, h, q, kv: q >= kv, 1, 1, n, n, device=dev) for n in sizes}

        class Attn(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.qkv, self.out = torch.nn.Linear(64, 192), torch.nn.Linear(64, 64)

            def forward(self, x):
                b, n, _ = x.shape
                q, k, v = self.qkv(x).view(b, n, 3, 4, 16).permute(2, 0, 3, 1, 4)
                y = flex_attention(q, k, v, block_mask=masks[n]).transpose(1, 2).reshape(b, n, 64)
                return self.out(y)

        def batch(n):
            return torch.randn(2, n, 64, device=dev)

        encoder = torch.nn.Linear(64, 64).to(dev)
        make = Attn
    else:
        sizes = (8, 12, 16)

        def batch(n):
            return torch.randn(n, 16, device=dev)

        encoder = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh()).to(dev)

        def make():
            return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))

    def trainer():
        model = make().to(dev)
        return torch.compile(model, backend=backend, dynamic=False), torch.optim.SGD(model.parameters(), lr=1e-3)

    return torch.compile(encoder, backend=backend, dynamic=False), trainer, batch, sizes


def run_once(args: argparse.Namespace, guard, seed: int, progress: list[int], errors: list[dict], t0: float) -> list:
    """One pipeline: a producer and `args.consumers` consumers; the threads, started."""
    import torch

    encoder, trainer, batch, sizes = models(args, seed)
    handoff: queue.Queue = queue.Queue(maxsize=1)  # bounded: put and get both wait, inside guarded steps
    guarded = (lambda key: contextlib.nullcontext()) if guard is None else guard.compile_guard
    decorate = (lambda fn: fn) if guard is None else guard.compile_guard

    @decorate
    def loss_of(model, x):
        return model(x).float().pow(2).mean()

    @decorate
    def train_step(model, opt, x):  # a guarded function calling another, inside a `with compile_guard`
        loss = loss_of(model, x)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return float(loss.detach())

    def producer() -> None:
        try:
            for s in range(args.steps):
                n = sizes[min(s // 2, len(sizes) - 1)]  # a new shape every two steps: the producer recompiles
                with guarded(n):
                    with torch.no_grad():
                        x = encoder(batch(n))
                    handoff.put(x)
                progress[0] += 1
        except Exception as exc:
            errors.append({"thread": "producer", "t": round(time.monotonic() - t0, 2),
                           "error": f"{type(exc).__name__}: {exc}"[:300]})
        finally:
            for _ in range(args.consumers):
                handoff.put(None)

    def consumer(i: int) -> None:
        model, opt = trainer()
        try:
            while True:
                with guarded("consumer-step"):
                    x = handoff.get()  # waits on the producer, inside the guarded step
                    if x is None:
                        return
                    train_step(model, opt, x)
                progress[i + 1] += 1
        except Exception as exc:
            errors.append({"thread": f"consumer-{i}", "t": round(time.monotonic() - t0, 2),
                           "error": f"{type(exc).__name__}: {exc}"[:300]})
            while handoff.get() is not None:  # drain so the producer never waits on a dead consumer
                pass

    threads = [threading.Thread(target=producer, name="producer", daemon=True)]
    threads += [threading.Thread(target=consumer, args=(i,), name=f"consumer-{i}", daemon=True)
                for i in range(args.consumers)]
    for t in threads:
        t.start()
    return threads


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")  # a warm cache would skip the racing compiles
    import torch
    import torch._dynamo

    guard = None if args.no_guard else load_guard(args.guard_file)
    t0 = time.monotonic()
    end = t0 + args.deadline
    errors: list[dict] = []
    done = 0
    base = {"torch": torch.__version__, "device": args.device, "model": args.model,
            "guard": "none" if guard is None else (args.guard_file or "dfdoctor.guard"),
            "consumers": args.consumers, "runs": args.runs}
    for run in range(args.runs):
        torch._dynamo.reset()  # every run compiles afresh
        progress = [0] * (args.consumers + 1)
        threads = run_once(args, guard, run, progress, errors, t0)
        for t in threads:
            t.join(max(0.0, end - time.monotonic()))
        if any(t.is_alive() for t in threads):
            elapsed = round(time.monotonic() - t0, 2)
            print(json.dumps({**base, "outcome": "hang", "completed": done, "elapsed_s": elapsed, "progress": progress,
                              "stuck": [t.name for t in threads if t.is_alive()], "errors": errors[:4]}), flush=True)
            faulthandler.dump_traceback(all_threads=True)
            sys.stderr.flush()
            os._exit(3)  # stuck threads cannot be joined
        if errors:
            break
        done += 1
    race = any("symbolically trace" in e["error"] or "CURRENT_PATCHER" in e["error"] for e in errors)
    outcome = "race" if race else "error" if errors else "ok"
    print(json.dumps({**base, "outcome": outcome, "completed": done, "elapsed_s": round(time.monotonic() - t0, 2),
                      "errors": errors[:4]}), flush=True)
    return 0 if outcome == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
