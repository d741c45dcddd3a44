"""Target kinds as classes: every registered kind implements the whole interface, the registry is the one
place a scheme is known, and the k8s:// class written out in docs/architecture.md fits the interface too."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from dfdoctor.launchline.launchpath import analyse, container_split
from dfdoctor.launchline.typed import target_of
from dfdoctor.targets import KINDS, USAGE, parse_target, transport
from dfdoctor.targets.kinds import ALL
from dfdoctor.targets.registry import TargetKind, hop_kind, kind_for
from dfdoctor.targets.target import Target

ARCH = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
# What a kind must write itself: the base class leaves these as NotImplementedError.
REQUIRED = ["parse", "spell", "describe", "reach_fix", "wrap", "typed_line", "transport_error"]
HOP_METHODS = ["is_hop", "hop_split", "hop_target"]


def test_the_required_list_is_what_the_base_class_leaves_open():
    open_ = sorted(n for n, f in vars(TargetKind).items()
                   if inspect.isfunction(f) and "raise NotImplementedError" in inspect.getsource(f))
    assert open_ == sorted(REQUIRED)


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.scheme)
def test_every_registered_kind_implements_the_whole_interface(cls):
    for name in REQUIRED:
        assert getattr(cls, name) is not getattr(TargetKind, name), f"{cls.__name__} lacks {name}"
    if not cls.runs_here:  # every remote kind is also a hop a user types in a launch line
        # an ssh hop's words are ssh's options, read by launchpath and the rehearsal; an exec hop's by its kind
        for name in HOP_METHODS if not cls.hop_takes_one_string else ["is_hop", "hop_target"]:
            assert getattr(cls, name) is not getattr(TargetKind, name), f"{cls.__name__} lacks {name}"
    assert cls.usage.startswith(cls.scheme)


def test_the_registry_is_the_one_list_of_schemes():
    assert KINDS == tuple(c.scheme for c in ALL) == ("local", "ssh", "pct", "lxc", "docker")
    assert USAGE == ("use local, ssh://[user@]host[:port], pct://[user@]host[:port]/VMID, lxc://NAME or "
                     "docker://CONTAINER")
    with pytest.raises(KeyError):
        kind_for("k8s")


@pytest.mark.parametrize("spec", ["local", "ssh://root@10.0.0.5:2222", "pct://root@pve/200", "lxc://box",
                                  "docker://trainer_1"])
def test_a_spec_spells_back_through_its_kind(spec):
    t = parse_target(spec)
    assert str(t) == spec and t.kind_class.scheme == t.kind
    assert parse_target(str(t)) == t


@pytest.mark.parametrize("argv, scheme, name, first", [
    (["ssh", "-p", "22", "root@h", "cmd"], "ssh", None, 5),
    (["pct", "exec", "200", "--", "python3", "t.py"], "pct", "200", 4),
    (["/usr/sbin/pct", "exec", "200", "python3"], "pct", "200", 3),
    (["lxc-attach", "-n", "box", "--", "python3"], "lxc", "box", 4),
    (["lxc-attach", "--name=box", "--clear-env", "--", "python3"], "lxc", "box", 4),
    (["docker", "exec", "-it", "-e", "A=1", "trainer", "python3"], "docker", "trainer", 6),
])
def test_a_launch_line_hop_is_read_by_the_same_class_as_the_target(argv, scheme, name, first):
    kind = hop_kind(argv)
    assert kind is kind_for(scheme)
    if scheme != "ssh":
        assert kind.hop_split(argv) == (name, first)
        assert container_split(argv)[:2] == (name, first)


def test_not_hops():
    for argv in (["pct", "list"], ["docker", "run", "img"], ["python3", "t.py"], ["podman", "exec", "c", "x"]):
        assert hop_kind(argv) is None
    # podman exec is read like docker's by the launch-path explanation, but reaches no --target
    assert container_split(["podman", "exec", "c", "x"]) == ("c", 3, "docker")
    assert container_split(["lxc-attach", "-n", "box", "--", "x"]) == ("box", 4, "lxc")
    assert target_of([("docker", ["podman", "exec", "c"])]).runs_here


def test_the_chain_of_hops_names_the_target_each_kind_reaches():
    a = analyse("ssh -p 2222 root@pve 'pct exec 200 -- python3 t.py > t.log'")
    assert [k for k, _ in a.job.frame.chain] == ["ssh", "pct"]
    assert str(target_of(a.job.frame.chain)) == "pct://root@pve:2222/200"
    a = analyse("docker exec -i trainer python3 t.py")
    assert str(target_of(a.job.frame.chain)) == "docker://trainer"
    a = analyse("lxc-attach -n box -- python3 t.py")
    assert str(target_of(a.job.frame.chain)) == "lxc://box"


def test_transport_asks_the_kind():
    t = parse_target("pct://root@pve/200")
    assert transport.wrap(t, ["echo", "a b"])[-1] == "pct exec 200 -- echo 'a b'"
    assert transport.transport_error(t, 255, "ssh: connect to host pve port 22: Connection refused\n") == \
        "ssh: connect to host pve port 22: Connection refused"
    gone = "Error response from daemon: No such container: x"
    assert transport.transport_error(parse_target("docker://x"), 1, gone) == gone
    assert transport.transport_error(parse_target("docker://x"), 1, "Traceback ...") is None
    with transport.connected(parse_target("lxc://box")) as err:  # no shared connection to open
        assert err is None


# -- k8s:// on paper --------------------------------------------------------------------------------------

def _k8s_text() -> str:
    section = ARCH.read_text().split("## k8s:// on paper", 1)[1]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "docs/architecture.md: the k8s class is a ```python block under '## k8s:// on paper'"
    return m.group(1)


def _k8s_class() -> type:
    scope: dict = {}
    exec(compile(_k8s_text(), "docs/architecture.md#k8s", "exec"), scope)
    return scope["K8s"]


def test_the_k8s_class_on_paper_parses_and_defines_every_method():
    tree = ast.parse(_k8s_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    assert set(REQUIRED + HOP_METHODS + ["session_hop", "typed_hop"]) <= methods
    assert [b.id for b in cls.bases] == ["TargetKind"]


def test_the_k8s_class_on_paper_works_on_examples():
    k8s = _k8s_class()()
    assert issubclass(type(k8s), TargetKind)
    for name in REQUIRED:
        assert getattr(type(k8s), name) is not getattr(TargetKind, name)
    t = k8s.parse("k8s://ml/trainer-0/main", "ml/trainer-0/main")
    assert t == Target("k8s", name="trainer-0", extra=(("namespace", "ml"), ("container", "main")))
    assert k8s.spell(t) == "k8s://ml/trainer-0/main"
    assert k8s.wrap(t, ["python3", "-c", "print(1)"]) == [
        "kubectl", "exec", "-i", "-n", "ml", "trainer-0", "-c", "main", "--", "python3", "-c", "print(1)"]
    assert "-t" in k8s.wrap(t, ["sh"], tty=True)
    assert k8s.typed_line(t, "echo hi") == "kubectl exec -n ml trainer-0 -c main -- sh -c 'echo hi'"
    with pytest.raises(ValueError):
        k8s.parse("k8s://Trainer", "Trainer")
    assert k8s.transport_error(t, 1, 'Error from server (NotFound): pods "trainer-0" not found') is not None
    assert k8s.transport_error(t, 3, "command terminated with exit code 3") is None
    hop = ["kubectl", "exec", "-it", "-n", "ml", "trainer-0", "-c", "main", "--", "python3", "t.py"]
    assert k8s.is_hop(hop) and not k8s.is_hop(["kubectl", "get", "pods"])
    assert k8s.hop_split(hop) == ("trainer-0", 9)
    assert k8s.hop_split(["kubectl", "exec", "trainer-0", "python3"]) == ("trainer-0", 3)
    assert k8s.hop_target(Target(), hop[:9]) == "k8s://ml/trainer-0/main"
    assert k8s.hop_target(parse_target("ssh://h"), hop[:9]) is None  # kubectl on another machine: no spec
    assert k8s.session_hop(hop[:9])[:3] == ["kubectl", "exec", "-i"] and "-it" not in k8s.session_hop(hop[:9])
    assert type(k8s).ship is TargetKind.ship  # shipping is the base class's: stdin through `kubectl exec -i`


def test_a_typed_launch_line_names_its_target_through_the_kinds():
    from dfdoctor.launchline.typed import is_launch_line, read
    typed = read(["ssh", "-p", "2222", "root@pve", "pct exec 200 -- nohup python3 /w/t.py > /w/t.log 2>&1 &"])
    assert (str(typed.target), typed.command, typed.log) == ("pct://root@pve:2222/200", ["python3", "/w/t.py"], "/w/t.log")
    assert str(read(["docker", "exec", "-d", "trainer", "python3", "t.py"]).target) == "docker://trainer"
    launch_lines = [["ssh", "h", "x"], ["pct", "exec", "1"], ["pct", "list"], ["docker", "exec", "c", "x"],
                    ["lxc-attach", "-n", "a"], ["nohup", "x"], ["sh", "-c", "x"]]
    jobs = [["docker", "run", "x"], ["python3", "t.py"], ["podman", "exec", "c", "x"], ["bash", "t.sh"]]
    assert all(is_launch_line(c) for c in launch_lines) and not any(is_launch_line(c) for c in jobs)
