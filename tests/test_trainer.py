"""The bundled trainer: its CLI, its block-diffusion mask, its guard, and a real training run whose loss falls."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.torch_forks import AS_MODULE

REPO = Path(__file__).resolve().parent.parent


def trainer(*args: str, timeout: float = 240, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `python -m dfdoctor.trainer ARGS` from the repository root."""
    return subprocess.run([sys.executable, "-m", "dfdoctor.trainer", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def test_help_names_the_guard_options() -> None:
    """`python -m dfdoctor.trainer --help` works and documents the guard switch."""
    r = trainer("--help", timeout=30)
    assert r.returncode == 0, r.stderr
    assert "--no-compile-guard" in r.stdout and "--preset" in r.stdout


def test_block_diffusion_mask() -> None:
    """A block sees target context up to its anchor and all of its own block, nothing else."""
    from dfdoctor.trainer.model import block_diffusion_mask_mod
    import torch

    T, B = 8, 4
    mod = block_diffusion_mask_mod(T, B)
    q = torch.arange(T).view(T, 1)
    kv = torch.arange(2 * T).view(1, 2 * T)
    m = mod(0, 0, q, kv)
    # query 5 is in block 1 (positions 4..7), anchor 4: context 0..4 and block slots 4..7
    assert m[5, :T].tolist() == [True] * 5 + [False] * 3
    assert m[5, T:].tolist() == [False] * 4 + [True] * 4
    assert m[0, :T].tolist() == [True] + [False] * 7


def test_flex_and_sdpa_agree_on_cpu() -> None:
    """The same mask through flex_attention (eager, no grad) and SDPA gives the same loss."""
    import torch
    from dfdoctor.trainer.model import Drafter, build_mask

    torch.manual_seed(0)
    flex = Drafter(40, 32, 32, 4, 1, 4, 0, "flex")
    sdpa = Drafter(40, 32, 32, 4, 1, 4, 0, "sdpa")
    sdpa.load_state_dict(flex.state_dict())
    tok, hid = torch.randint(1, 40, (2, 17)), torch.randn(2, 16, 32)
    with torch.no_grad():
        a = flex.loss(tok, hid, build_mask("flex", 16, 4, "cpu"))
        b = sdpa.loss(tok, hid, build_mask("sdpa", 16, 4, "cpu"))
    assert torch.allclose(a, b, atol=1e-5)


def test_trainer_default_guard_is_the_public_api() -> None:
    """The trainer's exclusive-compile is dfdoctor.guard itself, not a copy of it."""
    import dfdoctor.guard
    from dfdoctor.trainer import guard

    assert guard.compile_guard is dfdoctor.guard.compile_guard and guard.setup_thread is dfdoctor.guard.setup_thread
    with guard.step_context("exclusive-compile", "key") as ctx:
        assert ctx is None
    assert isinstance(guard.step_context("off", 1), contextlib.nullcontext)


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


@pytest.mark.slow
def test_eager_run_trains_logs_and_checkpoints(tmp_path: Path) -> None:
    """A tiny eager run: logs as it goes, loss falls in every drafter, checkpoints load back; with no
    OMP_NUM_THREADS, each op on one CPU thread (the next test says why, and tests the user's setting)."""
    import torch

    # buckets 16 and 32, not the default's 32 and 64: the same code on half the tokens (the test 9.1 -> 8.3 CPU-s,
    # medians of 5 alternated runs, round 24; the loss falls as far: 0.87 of the first in 60 steps either way)
    r = trainer("--no-compile", "--steps", "60", "--target-steps", "40", "--seq-lens", "16,32", "--out",
                str(tmp_path), timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    assert ", 1 CPU thread(s) per op," in r.stdout, r.stdout[:1000]
    assert "done" in r.stdout and "target step 40/40" in r.stdout
    s = _summary(tmp_path)
    assert s["failed"] == [] and len(s["results"]) == 3
    for res in s["results"].values():
        assert res["last_loss"] < res["first_loss"] * 0.9  # measured: 0.87 of the first in 60 steps
    ck = torch.load(tmp_path / "drafter-0.pt", weights_only=False)
    assert ck["step"] == 60 and "embed.weight" in ck["model"]
    assert (tmp_path / "target.pt").exists() and not list(tmp_path.glob("*.tmp"))


def test_a_cpu_run_computes_each_op_on_one_thread_unless_omp_num_threads_says_otherwise(tmp_path: Path) -> None:
    """The tiny models gain nothing from a team of threads per op, and a team stalls whenever another process
    holds a core (25 target steps took 15 s with torch's 2 threads on the loaded 2-core machine, 300 took 9 s
    with 1): one thread per op on a CPU, unless the user's OMP_NUM_THREADS says how many. The default's one
    thread is asserted on test_eager_run_trains_logs_and_checkpoints's run (the same code path: a second trainer
    here, ~2.5 CPU-s, proved nothing more); this run is the user's setting winning."""
    args = ("--no-compile", "--drafters", "1", "--steps", "1", "--target-steps", "1", "--out", str(tmp_path))
    r = trainer(*args, timeout=120, env={"OMP_NUM_THREADS": "2"})
    assert r.returncode == 0 and ", 2 CPU thread(s) per op," in r.stdout, r.stdout + r.stderr[-2000:]


# Where this test's CPU goes (round 24, 2-core machine under load 6-12, inductor cache empty, as on CI's fresh
# machine): the default's 2 buckets cost 60-63 CPU-s, ~39 of them in g++ (38 kernels' .so, ~1 CPU-s each with
# inductor's precompiled header; the header itself, ~10 more, is built once per machine and venv by whichever
# test compiles first: 70 CPU-s with it) and ~19 in the trainer (import torch 1.5, dynamo + AOT + inductor
# lowering of 4 graphs, the steps). One bucket (--seq-lens 32): 2 graphs, 22 kernels, the test 35-45 CPU-s
# (51 with the header). The second bucket bought no race window:
# with inductor on CPU the guard's entry check never found another thread's trace (0 times in a cold 2-bucket
# run, counted); recompiles under the guard while other threads run compiled graphs are the race preset's
# subject (test_race_preset_crashes_without_the_guard_and_trains_with_it: 7 buckets, a trace made to race).
# Inductor's caches are shared by every process (/tmp/torchinductor_$USER): the 2nd and 3rd drafters hit them
# (AOTAutogradCache and FX graph cache), so each graph is lowered and compiled once, not once per drafter.
@pytest.mark.slow
def test_compiled_guarded_run_trains(tmp_path: Path) -> None:
    """The default trainer with one length bucket: inductor in 3 drafter threads with the guard; loss falls,
    exit 0. 20 steps: every compile (forward and backward, compiled cold where the inductor cache has not seen
    them: what the test pays for) is in each drafter's first step; the loss falls 3.13 -> 2.91 in 20 steps."""
    r = trainer("--steps", "20", "--target-steps", "40", "--seq-lens", "32", "--out", str(tmp_path), timeout=420)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "guard exclusive-compile" in r.stdout and "compile True (inductor)" in r.stdout
    for res in _summary(tmp_path)["results"].values():
        # measured 3.13 -> 2.91 (0.93; 0.92 with the 2 buckets); untrained (no optimiser step) it moved under
        # 0.3% either way, and a bare `<` let 2 of 5 such runs pass (round 22)
        assert res["last_loss"] < res["first_loss"] * 0.95


def test_launcher_script_passes_arguments(tmp_path: Path) -> None:
    """trainer/launch.sh runs the trainer with the arguments given (here: --help)."""
    r = subprocess.run(["bash", str(REPO / "trainer" / "launch.sh"), "--help"], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "PYTHON": sys.executable, "TRAINER_LOG": str(tmp_path / "t.log")})
    assert r.returncode == 0, r.stderr
    assert "--no-compile-guard" in (tmp_path / "t.log").read_text()


# Two passes over the race preset's 7 length buckets (trainer/config.py): every compile, then every graph again;
# the target's pretraining (20 eager steps by the preset) is no part of any drafter's compile: one step.
RACE_STEPS = ("--steps", "14", "--target-steps", "1")
# Unguarded, the race comes at a drafter's first recompile (its second bucket, step 2): 3 steps, one for margin.
CRASH_STEPS = ("--steps", "3", "--target-steps", "1")


@pytest.mark.slow
def test_race_preset_crashes_without_the_guard_and_trains_with_it(tmp_path: Path, torch_forks_server) -> None:
    """--preset race: unguarded, drafters die of the FX race (exit 1, the message on stderr); guarded, exit 0.
    The guarded run takes 14 of the preset's 70 steps: the preset cycles 7 length buckets, each compiled at its
    first step, so every compile (the race's window) is in the first 7 steps of each drafter; the next 7 run every
    compiled graph again, and the 56 steps after them add training, not compiles. Measured (round 19): unguarded
    with --steps 14, 5 of 5 runs crashed, 3 of 4 drafters dead in each, as with 70; round 27: the deaths come at
    the first recompile (step 2), 16 of 16 runs crashed with --steps 2 (2 or 3 drafters dead), so the unguarded
    run takes 3: its 11 steps more were the surviving drafter compiling and training on."""
    run = torch_forks_server  # both runs in forks of one interpreter that imported torch and dynamo once
    bad = run([AS_MODULE, "dfdoctor.trainer", "--preset", "race", "--no-compile-guard", *CRASH_STEPS, "--out",
               str(tmp_path / "bad")], timeout=240, cwd=REPO)
    assert bad.returncode == 1, bad.stdout[-2000:]
    assert "Detected that you are using FX to symbolically trace" in bad.stderr
    assert "FAILED:" in bad.stdout and _summary(tmp_path / "bad")["failed"]
    good = run([AS_MODULE, "dfdoctor.trainer", "--preset", "race", *RACE_STEPS, "--out", str(tmp_path / "good")],
               timeout=240, cwd=REPO)
    assert good.returncode == 0, good.stderr[-2000:]
    assert _summary(tmp_path / "good")["failed"] == []
