"""Harm invariants of a rehearsal over generated launch lines (issue 31): lines built from the grammar of real
ones (wrappers, plumbing with substitutions, traps, here-documents, sourced files, functions, loops,
pipelines, `sh -c`), where every command that is not plumbing would leave a marker file if it ran.

On every line: no file of the user's folder changes, no marker appears, and nothing of the rehearsal is left
(no process naming its mark, no sentinel folder, no renamed file). Local only: tests/test_rehearse_harm.py runs
the named repros over ssh and pct."""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dfdoctor.rehearse.runner import rehearse
from dfdoctor.shell import quote
from infra.fixtures import kill_naming, procs_naming

# the user's real job: if a rehearsal ever ran it, its marker would change the folder
TRAIN = "import os, time\nopen(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'JOBRAN'), 'w').close()\n" \
        "for i in range(400):\n    print('step', i, flush=True)\n    time.sleep(0.1)\n"


def _harm(d: str, n: int) -> str:
    """A command that leaves marker n in the folder if it runs."""
    return f"touch {d}/MARK{n}"


def _pieces(d: str):
    """Strategies for the parts of a line in folder d (markers numbered by draw)."""
    n = st.integers(0, 99)
    harmful = st.one_of(
        n.map(lambda i: f"trap {quote(_harm(d, i))} EXIT"),
        n.map(lambda i: f"export X=$({_harm(d, i)})"),
        n.map(lambda i: f"Y=`{_harm(d, i)}`"),
        n.map(lambda i: f"cd $({_harm(d, i)}; echo {d})"),
        n.map(lambda i: f". {d}/env{i % 3}.sh"),
        n.map(lambda i: f"eval {quote(_harm(d, i))}"),
        n.map(lambda i: f"f{i}() {{ {_harm(d, i)}; }}; f{i}"),
        n.map(lambda i: f"for k in 1 2; do {_harm(d, i)}; done"),
        n.map(lambda i: f"cat > {d}/G{i} <<EOF\n$({_harm(d, i)})\nEOF\n"),
        n.map(lambda i: f"echo $({_harm(d, i)}) > {d}/H{i}"),
        n.map(lambda i: _harm(d, i)),
        st.just(f"mkdir -p {d}/made"),
    )
    plumbing = st.sampled_from([f"cd {d}", "export A=1", "umask 022", "set -e", f"cd \"$(dirname {d}/t.py)\""])
    wrapper = st.sampled_from(["", "nohup ", "setsid ", "env -u X ", "taskset -c 0 ", "stdbuf -o L ", "nice -n 5 ",
                               "timeout 60 ", f"flock {d}/lock ", "env A=1 "])
    args = st.sampled_from(["", " --lr 3e-4", f" --out $({_harm(d, 77)})", " --tag `date +%F`"])
    out = st.sampled_from([f" > {d}/t.log 2>&1", f" >> {d}/t.log 2>&1", f" 2>&1 | tee -a {d}/t.log",
                           f" > {d}/t.log 2>&1 & echo $! > {d}/t.pid", ""])
    return harmful, plumbing, wrapper, args, out


@st.composite
def lines(draw, d: str):
    harmful, plumbing, wrapper, args, out = _pieces(d)
    before = draw(st.lists(st.one_of(harmful, plumbing), max_size=3))
    job = f"{draw(wrapper)}python3 -u {d}/t.py{draw(args)}{draw(out)}"
    tail = draw(st.sampled_from([" &", ""]))
    body = "; ".join([*before, job]) + tail if not job.endswith("t.pid") else "; ".join([*before, job])
    return draw(st.sampled_from([body, f"sh -c {quote(body)}", f"bash -lc {quote(body)}"]))


FOLDER = f"/tmp/dfd-prop-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def folder():
    d = Path(FOLDER)
    d.mkdir()
    (d / "t.py").write_text(TRAIN)
    (d / "F").write_text("the user's file\n")
    (d / "t.log").write_text("the last run\n")
    (d / "t.pid").write_text("4242\n")
    for i in range(3):
        (d / f"env{i}.sh").write_text(f"{_harm(FOLDER, 90 + i)}\n")
    yield d
    kill_naming(FOLDER)
    shutil.rmtree(d, ignore_errors=True)


def _alive(p) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(line=lines(FOLDER))
def test_no_line_does_harm_or_leaves_anything(folder, line):
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    r = rehearse(line, cwd=str(folder))
    time.sleep(0.2)
    after = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert after == before, (line, r.plan.line if r.plan else r.unobservable)
    if r.plan is not None:
        mark = r.plan.mark
        deadline = time.monotonic() + 5
        while [p for p in procs_naming(mark) if _alive(p)] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p.info["cmdline"] for p in procs_naming(mark) if _alive(p)], line
        assert not list(Path("/tmp").glob(f"{mark}*")), line
        assert not list(Path.home().glob(f"*{mark}*")), line
