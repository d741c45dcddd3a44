"""A training script of the shape users write: N threads, each torch.compile of its own model, forward +
backward + optimizer over two input shapes. `--guard` adds exactly the lines the compile.race fix shows:

    from dfdoctor.guard import compile_guard
    with compile_guard(x.shape):
        loss = model(x); loss.backward(); opt.step(); opt.zero_grad()

One JSON line on stdout: outcome ok | race | error | hang, per-thread progress and errors. A run that stops
progressing is ended at --deadline: all thread stacks go to stderr (faulthandler) and the process exits 3.

--throughput: after warm-up (every shape compiled), `--rounds` rounds in which all threads run `--steps-per-round`
warm steps without the guard, then as many with it, side by side in one process; per-round wall time of each.

    python bench/user_threads.py --guard                         # CPU, backend race (wide race window)
    python bench/user_threads.py --device cuda --model flex      # the H200 shape: flex_attention, inductor
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import statistics
import sys
import threading
import time


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", choices=("mlp", "flex"), default="mlp")
    p.add_argument("--backend", default=None, help="inductor (default on cuda), race (default on cpu), or "
                   "race-unlocked (the backward traced without compile_lock, as aot_eager does)")
    p.add_argument("--guard", action="store_true", help="use dfdoctor.guard.compile_guard as the fix says")
    p.add_argument("--install-only", action="store_true", help="only dfdoctor.guard.install() in the main thread: "
                   "no per-thread settings, so every backward compiles lazily under the process-wide gate")
    p.add_argument("--flag-only", action="store_true", help="only force_non_lazy_backward_lowering in each "
                   "thread (a rejected candidate, kept to compare)")
    p.add_argument("--steps", type=int, default=6, help="steps per thread (shapes alternate)")
    p.add_argument("--deadline", type=float, default=120.0, help="seconds for all runs together")
    p.add_argument("--runs", type=int, default=1, help="runs one after another in this process, each after "
                   "torch._dynamo.reset() (every run compiles afresh), up to the first that fails")
    p.add_argument("--throughput", action="store_true")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps-per-round", type=int, default=20)
    return p.parse_args(argv)


def race_backend(locked: bool = True):
    """aot_autograd whose backward compiler runs make_fx under dynamo's compile lock (as inductor's
    compile_fx_backward does when a pattern matches): the CPU race window compile.race also uses.
    Unlocked, the backward's trace takes no lock, as aot_eager's does."""
    import contextlib

    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.convert_frame import compile_lock
    from torch.fx.experimental.proxy_tensor import make_fx

    def bw(gm, example_inputs):
        with compile_lock if locked else contextlib.nullcontext():
            make_fx(gm)(*example_inputs)
        return gm

    return aot_autograd(fw_compiler=lambda gm, _: gm, bw_compiler=bw)


def build(index: int, args: argparse.Namespace):
    """The thread's own model, compiled, its optimizer, and a batch maker per shape."""
    import torch

    torch.manual_seed(index)
    backend = args.backend or ("inductor" if args.device != "cpu" else "race")
    backend = race_backend(backend == "race") if backend.startswith("race") else backend
    if args.model == "flex":
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        class Attn(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.qkv = torch.nn.Linear(64, 192)
                self.out = torch.nn.Linear(64, 64)

            def forward(self, x, mask):
                b, n, _ = x.shape
                q, k, v = self.qkv(x).view(b, n, 3, 4, 16).permute(2, 0, 3, 1, 4)
                y = flex_attention(q, k, v, block_mask=mask).transpose(1, 2).reshape(b, n, 64)
                return self.out(y).float().pow(2).mean()

        model = Attn().to(args.device)
        masks = {n: create_block_mask(lambda b, h, q, kv: q >= kv, 1, 1, n, n, device=args.device)
                 for n in (128, 256)}

        def batch(n):
            return (torch.randn(2, n, 64, device=args.device), masks[n])
        shapes = (128, 256)
    else:
        model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(args.device)

        def batch(n):
            return (torch.randn(n, 16, device=args.device),)
        shapes = (8, 12)
    compiled = torch.compile(model, backend=backend, dynamic=False)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    return compiled, opt, batch, shapes


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")  # a warm cache would skip the racing compiles
    import torch
    import torch._dynamo

    if args.guard or args.throughput:
        from dfdoctor.guard import compile_guard
    if args.install_only:
        from dfdoctor.guard import install
        install()
    progress = [0] * args.threads
    errors: list[dict] = []
    rounds: dict[str, list[float]] = {"unguarded": [], "guarded": []}
    t0 = time.monotonic()

    def step(model, opt, x) -> None:
        loss = model(*x)
        if args.model == "mlp":
            loss = loss.sum()
        loss.backward()
        opt.step()
        opt.zero_grad()

    def sync() -> None:
        if args.device != "cpu":
            torch.cuda.synchronize()

    def worker(i: int) -> None:
        try:
            if args.flag_only:
                import torch._functorch.config as fconfig

                fconfig.force_non_lazy_backward_lowering = True
            model, opt, batch, shapes = build(i, args)
            barrier.wait()
            for s in range(args.steps):
                x = batch(shapes[s % len(shapes)])
                if args.guard:
                    with compile_guard(x[0].shape):  # the fix: the whole step, keyed on its input shape
                        step(model, opt, x)
                else:
                    step(model, opt, x)
                progress[i] += 1
            if not args.throughput:
                return
            for _ in range(args.rounds):  # warm steps only: every shape compiled above
                for mode in ("unguarded", "guarded"):
                    barrier.wait()
                    t = time.monotonic()
                    for s in range(args.steps_per_round):
                        x = batch(shapes[s % len(shapes)])
                        with compile_guard(x[0].shape) if mode == "guarded" else contextlib.nullcontext():
                            step(model, opt, x)
                    sync()
                    barrier.wait()
                    if i == 0:
                        rounds[mode].append(time.monotonic() - t)
        except threading.BrokenBarrierError:
            return
        except Exception as exc:
            errors.append({"thread": i, "t": round(time.monotonic() - t0, 2), "error": f"{type(exc).__name__}: {exc}"[:300]})
            barrier.abort()

    completed = 0
    for run in range(args.runs):
        if run:
            torch._dynamo.reset()  # the models below compile afresh, as in a fresh interpreter
        barrier, progress[:] = threading.Barrier(args.threads), [0] * args.threads  # the workers read them
        threads = [threading.Thread(target=worker, args=(i,), name=f"worker-{i}", daemon=True)
                   for i in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(0.0, t0 + args.deadline - time.monotonic()))
        if errors or any(t.is_alive() for t in threads):
            break
        completed += 1
    base = {"torch": torch.__version__, "device": args.device, "model": args.model,
            "guard": "install-only" if args.install_only else "flag-only" if args.flag_only else args.guard,
            "threads": args.threads, "runs": args.runs, "completed": completed,
            "elapsed_s": round(time.monotonic() - t0, 2), "progress": progress, "errors": errors[:4]}
    if any(t.is_alive() for t in threads):
        print(json.dumps({**base, "outcome": "hang"}), flush=True)
        faulthandler.dump_traceback(all_threads=True)
        sys.stderr.flush()
        os._exit(3)
    race = any("symbolically trace" in e["error"] or "CURRENT_PATCHER" in e["error"] for e in errors)
    out = {**base, "outcome": "race" if race else "error" if errors else "ok"}
    if args.throughput and rounds["guarded"]:
        n = args.threads * args.steps_per_round
        out["throughput"] = {m: {"round_s": [round(x, 4) for x in v], "median_steps_per_s": round(n / statistics.median(v), 1)}
                             for m, v in rounds.items()}
    print(json.dumps(out), flush=True)
    return 0 if out["outcome"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
