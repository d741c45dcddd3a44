"""`check --slurm-nodes 2` on a real two-node Slurm (tests/infra/slurm_pair.sh: nodes n1 and n2, two slurmds of
one host). One node is made to differ the way nodes of a real cluster do, through what its tasks are told
(a PYTHONPATH of its own, an interface name that does not exist there), and the report must name that node.
cuda.nccl forms one gloo group over both nodes' ranks, as a multi-node torchrun would."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dfdoctor.slurm import step
from infra.slurm_fixtures import slurm_pair  # noqa: F401

DFDOCTOR = [sys.executable, "-m", "dfdoctor"]
PY = sys.executable  # the training interpreter on every node: this one has torch


def check_nodes(pair, tmp: Path, *args: str, env: dict | None = None, timeout: float = 200, nodes: str = "2"
                ) -> tuple[int, dict, subprocess.CompletedProcess]:
    out = tmp / "nodes.json"
    p = subprocess.run([*DFDOCTOR, "check", "--slurm-nodes", nodes, "--format", "json", "--output", str(out),
                        "--format", "html", "--output", str(tmp / "nodes.html"), "--format", "text", *args],
                       cwd=tmp, capture_output=True, text=True, timeout=timeout, env=pair.env(**(env or {})))
    return p.returncode, (json.loads(out.read_text()) if out.exists() else {}), p


def rows(doc: dict) -> dict[str, dict]:
    return {t["target"]: t for t in doc["targets"]}


def checks_on(doc: dict, target: str, cid: str) -> dict:
    (rec,) = [c for c in doc["checks"] if c["target"] == target and c["id"] == cid]
    return rec


def test_a_module_that_only_one_node_has_is_named_on_the_other(slurm_pair, tmp_path):
    lib = tmp_path / "site-n1"
    lib.mkdir()
    (lib / "dfd_nodelib.py").write_text("VALUE = 1\n")
    slurm_pair.quirk("n1", PYTHONPATH=str(lib))  # installed on n1 only
    rc, doc, p = check_nodes(slurm_pair, tmp_path, "--only", "imports.smoke", "--", PY, "-c", "import dfd_nodelib")
    assert rc == 1, p.stdout + p.stderr
    assert rows(doc)["node:n1"]["verdict"]["state"] == "ok"
    assert rows(doc)["node:n2"]["verdict"]["state"] == "failed"
    assert checks_on(doc, "node:n2", "imports.smoke")["cause"] == "missing-module"
    assert "node:n2" in doc["verdict"]["summary"] and "node:n1" not in doc["verdict"]["summary"]
    assert "imports.smoke: " in p.stdout and "on node:n2" in p.stdout.split("what differs:")[1]
    html = (tmp_path / "nodes.html").read_text()
    assert "node:n1" in html and "node:n2" in html and "dfd_nodelib" in html


def test_a_node_where_dfdoctor_cannot_even_start_is_still_named(slurm_pair, tmp_path):
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "json.py").write_text("raise ImportError('this node shadows the json module')\n")
    slurm_pair.quirk("n2", PYTHONPATH=str(shadow))
    rc, doc, p = check_nodes(slurm_pair, tmp_path, "--only", "imports.smoke", "--", PY, "-c", "pass")
    assert rc == 1, p.stdout + p.stderr
    row = rows(doc)["node:n2"]
    assert row["verdict"]["state"] == "failed" and "gave no report" in row["verdict"]["summary"]
    assert "shadows the json module" in checks_on(doc, "node:n2", "slurm.nodes")["details"]
    assert rows(doc)["node:n1"]["verdict"]["state"] == "ok"


def test_the_node_with_a_small_dev_shm_is_named_by_its_facts(slurm_pair, tmp_path):
    """n2's /dev/shm is a 64 MiB tmpfs of its own: target.reachable reports each node's facts on a Slurm node,
    and *what differs* names n2's /dev/shm, with n1's beside it, in text and HTML."""
    rc, doc, p = check_nodes(slurm_pair, tmp_path, "--only", "target.reachable", "--", PY, "-c", "pass")
    assert rc == 0, p.stdout + p.stderr
    small = f"node:{slurm_pair.small_shm_node}"
    env = {t: r["environment"] for t, r in rows(doc).items()}
    assert env[small]["dev_shm_kb"] == "65536" and env["node:n1"]["dev_shm_kb"] != "65536", env
    assert {"kernel", "nvidia_driver"} <= set(env["node:n1"])
    assert "Slurm node n1 answers" in checks_on(doc, "node:n1", "target.reachable")["summary"]
    differs = p.stdout.split("what differs:")[1]
    assert "/dev/shm size: " in differs and f"64 MiB on {small}" in " ".join(differs.split()), p.stdout
    assert "65536" in (tmp_path / "nodes.html").read_text()


def test_nccl_forms_one_gloo_group_over_both_nodes(slurm_pair, tmp_path):
    rc, doc, p = check_nodes(slurm_pair, tmp_path, "--only", "cuda.nccl", "--", PY, "-c", "pass",
                             env={"DFDOCTOR_NCCL_BACKEND": "gloo"})
    assert rc == 0, p.stdout + p.stderr
    for node, ranks in (("n1", [0, 1]), ("n2", [2, 3])):
        rec = checks_on(doc, f"node:{node}", "cuda.nccl")
        nccl = rec["data"]["nccl"]
        assert rec["status"] == "ok" and nccl["world_size"] == 4, rec
        assert [r["rank"] for r in nccl["ranks"]] == ranks and {r["node"] for r in nccl["ranks"]} == {node}
        assert all(r["all_reduce"]["min"] == r["all_reduce"]["max"] == 10 for r in nccl["ranks"])
        assert nccl["nodes"]["names"] == ["n1", "n2"] and nccl["nodes"]["this"] == node
        assert "4 ranks on 2 nodes (n1, n2)" in rec["summary"]


def test_nccl_over_the_nodes_blames_the_node_with_a_wrong_interface(slurm_pair, tmp_path):
    slurm_pair.quirk("n2", GLOO_SOCKET_IFNAME="ib7")  # an InfiniBand name this node does not have
    rc, doc, p = check_nodes(slurm_pair, tmp_path, "--timeout", "60", "--only", "cuda.nccl", "--", PY, "-c", "pass",
                             env={"DFDOCTOR_NCCL_BACKEND": "gloo"})
    assert rc == 1, p.stdout + p.stderr
    culprit, waiter = checks_on(doc, "node:n2", "cuda.nccl"), checks_on(doc, "node:n1", "cuda.nccl")
    assert culprit["status"] == "fail" and "Unable to find address for: ib7" in culprit["summary"]
    assert "GLOO_SOCKET_IFNAME" in culprit["fix"]
    # n1's ranks were inside init_process_group; the store watcher let them go as soon as n2 said why
    assert waiter["status"] == "warn" and "stopped waiting because rank" in waiter["summary"], waiter
    assert "on n2" in waiter["summary"]
    assert doc["verdict"]["summary"].startswith("1 of 2") and "node:n2" in doc["verdict"]["summary"]


@pytest.mark.slow
@pytest.mark.parametrize("how, said, outcome", [("drop", "got no answer", "no answer"),
                                                ("reject", "No route to host", "no route")])
def test_nccl_names_the_node_that_cannot_reach_rank_0s_store(slurm_pair, tmp_path, how, said, outcome):
    """A firewall on n1 drops (or rejects) what n2 sends it (all but slurmd's port: the job still starts). n2's
    ranks cannot reach rank 0's store on n1: n2 fails, naming its ranks, the address and port it tried and what its
    tries got (observed), with what to open (not tried); n1, whose store heard nothing from n2, only warns. Once
    the network is whole again the same group forms."""
    n1_addr = slurm_pair.addrs[slurm_pair.nodes.index("n1")]
    slurm_pair.cut("n2", "n1", how)
    try:
        t0 = time.monotonic()
        # the verdict comes at the deadline (silence is a fact once it has lasted); 40 s leave room for 4 ranks
        # importing torch on a loaded host (20 s did not, at load 21 on 2 cores)
        rc, doc, p = check_nodes(slurm_pair, tmp_path, "--timeout", "40", "--only", "cuda.nccl", "--", PY, "-c",
                                 "pass", env={"DFDOCTOR_NCCL_BACKEND": "gloo"})
        took = time.monotonic() - t0
    finally:
        slurm_pair.mend()
    assert rc == 1, p.stdout + p.stderr
    culprit, waiter = checks_on(doc, "node:n2", "cuda.nccl"), checks_on(doc, "node:n1", "cuda.nccl")
    master = culprit["data"]["nccl"]["nodes"]["master"]
    assert master.startswith(n1_addr + ":"), master
    summary = " ".join(culprit["summary"].split())
    assert culprit["status"] == "fail" and culprit["cause"] == "nccl-failed", culprit
    assert summary.startswith("rank 2 (n2), rank 3 (n2) failed in rendezvous"), summary
    assert f"cannot reach rank 0's store at {master} on n1 (a network reachability fact, observed)" in summary
    assert said in summary
    for r in culprit["data"]["nccl"]["ranks"]:
        u = r["unreachable"]
        # the last try may be cut short by the deadline; the kernel rate-limits a firewall's ICMP answers, so some
        # rejected tries get no answer
        tries = set(u["outcomes"]) - {"cut short"}
        assert f"{u['addr']}:{u['port']}" == master and u["node"] == "n1" and outcome in tries, r
        assert tries <= {"no answer", "no route"}, r
    fix = culprit["fix"]
    assert f"open TCP port {master.split(':')[1]} on n1 ({n1_addr}) to connections from n2" in fix
    assert "not tried" in fix
    assert waiter["status"] == "warn" and waiter["cause"] == "rank-missing", waiter
    assert "waited in vain for node n2" in waiter["summary"] and master in waiter["summary"]
    assert doc["verdict"]["summary"].startswith("1 of 2") and "node:n2" in doc["verdict"]["summary"]
    assert took < 80, took  # the check's --timeout 40 bounds it: n2's connections get no answer until then
    rc, doc, p = check_nodes(slurm_pair, tmp_path, "--only", "cuda.nccl", "--", PY, "-c", "pass",
                             env={"DFDOCTOR_NCCL_BACKEND": "gloo"})
    assert rc == 0, p.stdout + p.stderr  # mended: the same group forms over both nodes


@pytest.mark.slow
def test_a_store_that_never_listened_is_not_called_a_network_fault(slurm_pair, tmp_path):
    """The counterpart: dfdoctor cannot start on n1 (its PYTHONPATH shadows json), so rank 0's store never
    listens. n2's tries are refused, i.e. n1 answers: n2's ranks timed out waiting and say so, with no claim about
    the network."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "json.py").write_text("raise ImportError('this node shadows the json module')\n")
    slurm_pair.quirk("n1", PYTHONPATH=str(shadow))
    rc, doc, p = check_nodes(slurm_pair, tmp_path, "--timeout", "40", "--only", "cuda.nccl", "--", PY, "-c", "pass",
                             env={"DFDOCTOR_NCCL_BACKEND": "gloo"})
    assert rc == 1, p.stdout + p.stderr
    rec = checks_on(doc, "node:n2", "cuda.nccl")
    summary = " ".join(rec["summary"].split())
    assert rec["status"] == "fail" and rec["cause"] == "nccl-hang", rec
    assert "timed out waiting for the other ranks" in summary and "refused every connection" in summary, summary
    assert "reachability" not in summary and not any(r["unreachable"] for r in rec["data"]["nccl"]["ranks"])
    assert rows(doc)["node:n1"]["verdict"]["state"] == "failed"  # gave no report


def test_step_outside_slurm_says_why_and_the_port_is_the_same_on_every_node():
    assert "not a task of a Slurm step" in step.current({})
    a = step.Step("4242", "0", ("n1", "n2"), 0, "10.0.0.1")
    b = step.Step("4242", "0", ("n1", "n2"), 1, "10.0.0.1")
    assert a.port == b.port and step.PORT_BASE <= a.port < step.PORT_BASE + step.PORT_SPAN
    assert step.Step("4243", "0", ("n1",), 0, "x").port != a.port
    assert a.node_of(3, 2) == "n2" and a.node_of(9, 2) == "?"


@pytest.mark.parametrize("args", [("--slurm-nodes", "2", "--target", "ssh://h")])
def test_slurm_nodes_takes_no_target(slurm_pair, tmp_path, args):
    p = subprocess.run([*DFDOCTOR, "check", *args, "--", PY, "-c", "pass"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60, env=slurm_pair.env())
    assert p.returncode == 2 and "takes no --target" in p.stderr


def test_inside_salloc_all_means_every_node_of_the_allocation(slurm_pair, tmp_path):
    out = tmp_path / "all.json"
    p = subprocess.run(["salloc", "-N2", *DFDOCTOR, "check", "--slurm-nodes", "all", "--only", "target.reachable",
                        "--format", "json", "--output", str(out), "--", PY, "-c", "pass"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=200, env=slurm_pair.env())
    doc = json.loads(out.read_text())
    assert p.returncode == 0, p.stderr
    env = {t: r["environment"] for t, r in rows(doc).items()}
    assert sorted(env) == ["node:n1", "node:n2"]
    assert env[f"node:{slurm_pair.small_shm_node}"]["dev_shm_kb"] == "65536"


def test_nodes_that_count_different_numbers_of_ranks_are_told_so(slurm_pair, tmp_path):
    """n2 starts one rank where n1 starts two (as when one GPU of n2 is lost): node-local numbering would give two
    processes one rank; the census makes it every rank's error, with each node's count and the fix."""
    slurm_pair.quirk("n2", DFDOCTOR_NCCL_WORLD_SIZE="1")
    rc, doc, p = check_nodes(slurm_pair, tmp_path, "--timeout", "60", "--only", "cuda.nccl", "--", PY, "-c", "pass",
                             env={"DFDOCTOR_NCCL_BACKEND": "gloo"})
    assert rc == 1, p.stdout + p.stderr
    for node in ("n1", "n2"):
        rec = checks_on(doc, f"node:{node}", "cuda.nccl")
        assert rec["status"] == "fail" and "different numbers of ranks (n1 2, n2 1)" in rec["summary"], rec["summary"]
        assert "visible GPUs" in rec["fix"]


def test_more_nodes_than_the_pair_has_is_never_starts_at_once(slurm_pair, tmp_path):
    """`--slurm-nodes 3` on two nodes: srun --test-only says so at once, with the numbers (it was an ERROR
    after srun's 30 s --immediate wait)."""
    t0 = time.monotonic()
    rc, doc, p = check_nodes(slurm_pair, tmp_path, "--", PY, "-c", "pass", nodes="3")
    took = time.monotonic() - t0
    said = json.dumps(doc)
    assert rc == 1 and doc["verdict"]["cause"] == "never-starts", p.stdout + p.stderr
    assert f"partition {slurm_pair.partition} has 2 node(s)" in said and "--slurm-nodes 2" in said
    assert took < 20, took
    rc, doc, p = check_nodes(slurm_pair, tmp_path, "--only", "imports.smoke", "--", PY, "-c", "pass", nodes="2")
    assert rc == 0 and len(doc["targets"]) == 2, p.stdout + p.stderr  # two is what the pair has: it runs
