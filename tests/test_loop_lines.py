"""A job's loop read from its output (dfdoctor.agent.loop_lines) and the settle check's reading of it
(settle.in_its_loop): what counts as the job being past its start, and what never does."""

from __future__ import annotations

from dfdoctor.agent import loop_lines
from dfdoctor.agent.loop_lines import LoopLines, shape_of
from dfdoctor.agent.record import Masker
from dfdoctor.watch import settle


def _printed(lines: list[tuple[bytes, float]]) -> LoopLines:
    loop = LoopLines()
    for line, t in lines:
        loop.add(line, t)
    return loop


def _heartbeat(loop: LoopLines, last_output_t: float) -> dict:
    return {"loop": loop.best(), "last_output_t": last_output_t}


def test_numbers_are_taken_out_of_a_line():
    assert shape_of(b"iter 120: loss 2.3104, time 412.52ms, mfu -100.00%") == b"iter #: loss #, time #ms, mfu #%"
    assert shape_of(b"step 1,024 lr 3e-4") == shape_of(b"step 2,048 lr 2.5e-05") == b"step # lr #"
    assert shape_of(b"Initializing a new model from scratch") is None  # a line with no number is no step


def test_a_training_loop_is_past_its_start():
    loop = _printed([(b"step %d loss %.4f" % (i, 1 / (i + 1)), 100 + 0.2 * i) for i in range(20)])
    seen = settle.in_its_loop(_heartbeat(loop, 103.8))
    assert seen == 'in its loop: "step # loss #" printed 20 times over 3.8 s'


def test_a_table_printed_at_once_is_a_burst_not_a_loop():
    loop = _printed([(b"layers.%d.attn.weight [768, 768]" % i, 100 + 0.001 * i) for i in range(48)])
    assert loop.best()["count"] == 48
    assert settle.in_its_loop(_heartbeat(loop, 100.05)) is None


def test_four_shards_loaded_a_second_apart_are_not_a_loop():
    loop = _printed([(b"Loading checkpoint shard %d/4" % i, 100 + i) for i in range(1, 5)])
    assert settle.in_its_loop(_heartbeat(loop, 104)) is None


def test_a_loop_that_ended_is_not_the_jobs_loop():
    loop = _printed([(b"loaded file %d of 40" % i, 100 + 0.1 * i) for i in range(40)] +
                    [(b"building the model", 104.0), (b"model has 12M parameters and 6 layers", 112.0)])
    assert settle.in_its_loop(_heartbeat(loop, 112.0)) is None
    assert settle.in_its_loop(_heartbeat(loop, 104.0)) is not None  # while it lasted, it was one


def test_the_shape_printed_lately_wins_over_one_from_the_start():
    loop = _printed([(b"tokenized %d docs" % i, 100 + 0.01 * i) for i in range(100)] +
                    [(b"epoch 0 step %d loss 1.0" % i, 120 + 0.5 * i) for i in range(8)])
    assert loop.best()["shape"] == "epoch # step # loss #"
    assert settle.in_its_loop(_heartbeat(loop, 123.5)).startswith('in its loop: "epoch # step # loss #"')


def test_a_secret_in_the_loops_line_is_masked_before_its_digits_are_taken_out(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_Zq3kT9vX2mB7nW4pL8sR6yC1")
    loop = _printed([(b"step %d using hf_Zq3kT9vX2mB7nW4pL8sR6yC1" % i, float(i)) for i in range(6)])
    shown = loop.best(Masker([]).value)["shape"]
    assert "Zq" not in shown and "kT" not in shown and shown.startswith("step # using "), shown


def test_memory_stays_bounded_and_a_loop_survives_a_flood_of_unique_lines():
    loop = LoopLines()
    for i in range(5):
        loop.add(b"step %d" % i, 100.0 + i)
    for i in range(5000):
        loop.add(b"sample-%s id %d" % (bytes([65 + i % 26]) * (1 + i // 26), i), 105.0)
    assert len(loop.shapes) <= loop_lines.MAX_SHAPES
    assert loop.shapes[b"step #"][0] == 5
    loop.add(b"x" * 100_000 + b" 1", 106.0)
    assert all(len(v[3]) <= loop_lines.LINE_KEPT for v in loop.shapes.values())


def test_a_warm_up_that_ends_within_the_settle_time_is_a_phase_not_the_loop():
    """The bundled trainer's GPU run: 15 `target step N/300` lines in 2.5 s, then 22 s compiling drafters (where
    the deadlock dfdoctor exists for happens). A loop that reaches its total that soon is not the job's loop."""
    loop = _printed([(b"19:52:26 target step %d/300 loss 1.%d" % (20 * i, i), 100 + 0.25 * i) for i in range(1, 14)])
    assert loop.best()["done"] == 260 and loop.best()["of"] == 300 and loop.best()["first_done"] == 20
    assert settle.in_its_loop(_heartbeat(loop, 103.25)) is None
    assert settle.about_to_end(_heartbeat(loop, 103.25)).startswith("its loop is a phase about to end (260/300")
    assert settle.in_its_loop(_heartbeat(loop, 103.25), settle_s=0.5) is not None  # it ends after 0.5 s


def test_a_loop_far_from_its_total_or_with_a_total_that_does_not_move_is_the_loop():
    long_run = _printed([(b"step %d/100000 loss 2.0" % (10 * i), 100 + 0.5 * i) for i in range(8)])
    assert settle.in_its_loop(_heartbeat(long_run, 103.5)) is not None
    epochs = _printed([(b"epoch 1/10 batch %d loss 2.0" % i, 100 + 0.5 * i) for i in range(8)])
    assert epochs.best()["done"] == 1 and settle.in_its_loop(_heartbeat(epochs, 103.5)) is not None
    finished = _printed([(b"step %d/7" % i, 100 + 0.5 * i) for i in range(8)])
    assert settle.in_its_loop(_heartbeat(finished, 103.5)) is None  # it reached its total


def test_a_count_towards_a_total_is_the_one_that_moves_not_a_date_or_a_path():
    assert loop_lines.fractions("[step 140/300] loss 2.1") == [(140, 300)]
    assert loop_lines.fractions("12/03 saved to out/run7/ckpt-140, epoch 2/10") == [(2, 10)]
    assert loop_lines.fractions("ratio 3/0 and 4/x, 2026/12/03") == []
    assert loop_lines.moving("Epoch 1/1 step 10/900", "Epoch 1/1 step 90/900") == (10, 90, 900)
    assert loop_lines.moving("Epoch 1/1 step 10", "Epoch 1/1 step 90") == (1, 1, 1)  # unmoved: no end foreseen


def test_a_single_epoch_that_never_moves_is_not_a_phase_that_ended():
    """`Epoch 1/1` reads as a total reached; it never moved, so it says nothing about when the loop ends."""
    loop = _printed([(b"Epoch 1/1 batch %d loss 2.0" % i, 100 + 0.5 * i) for i in range(8)])
    assert settle.about_to_end(_heartbeat(loop, 103.5)) is None
    assert settle.in_its_loop(_heartbeat(loop, 103.5)) is not None
    steps = _printed([(b"Epoch 1/1 step %d/900 loss 2.0" % (10 * i), 100 + 0.5 * i) for i in range(8)])
    assert settle.about_to_end(_heartbeat(steps, 103.5)) is None  # 830 steps left at 20 a second: 41 s
    assert "phase about to end (280/300" in settle.about_to_end(
        _heartbeat(_printed([(b"step %d/300" % (40 * i), 100 + 0.5 * i) for i in range(1, 8)]), 103.5))
