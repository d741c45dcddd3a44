"""--target: parsing, exact quoting through real ssh / pct / lxc-attach hops, probes shipped over stdin."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from dfdoctor.context import Context
from dfdoctor.engine import build_context
from dfdoctor.model import Status
from dfdoctor.probe import run_on_target, run_probe
from dfdoctor.targets import Target, parse_target
from dfdoctor.targets import transport
from infra.fixtures import Infra, infra, ssh_config_env  # noqa: F401

HOSTILE = ["plain", "two words", "it's", '"dq"', "$(touch /tmp/dfdoctor-pwned)", "; touch /tmp/dfdoctor-pwned",
           "`touch /tmp/dfdoctor-pwned`", "a\\b", "*", "~", "&& echo x", "$HOME", "new\nline", ""]


# -- parsing ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,expected", [
    ("local", Target()),
    (None, Target()),
    ("ssh://gpu1", Target("ssh", host="gpu1")),
    ("ssh://root@10.0.0.5:2222", Target("ssh", host="10.0.0.5", user="root", port=2222)),
    ("pct://root@pve/200", Target("pct", host="pve", user="root", vmid="200")),
    ("pct://root@pve.lan:22/200", Target("pct", host="pve.lan", user="root", port=22, vmid="200")),
    ("ssh://[::1]:22", Target("ssh", host="[::1]", port=22)),
    ("lxc://train-box", Target("lxc", name="train-box")),
    ("docker://trainer_1", Target("docker", name="trainer_1")),
])
def test_parse_target(spec, expected):
    t = parse_target(spec)
    assert t == expected
    assert parse_target(str(t)) == t  # the canonical spelling parses back to the same target


@pytest.mark.parametrize("spec,words", [
    ("gpu1", "is not a target"),
    ("ftp://h", "unknown target scheme"),
    ("ssh://", "no host"),
    ("ssh://-oProxyCommand=touch_x", "bad host"),
    ("ssh://h:99999", "port must be"),
    ("ssh://h:22/200", "ssh targets take no path"),
    ("pct://root@pve", "end in /VMID"),
    ("pct://root@pve/abc", "end in /VMID"),
    ("lxc://", "container name"),
    ("docker://a;b", "container name"),
    ("ssh://us er@h", "bad user"),
])
def test_parse_target_rejects_with_one_clear_line(spec, words):
    with pytest.raises(ValueError) as exc:
        parse_target(spec)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_malformed_target_is_usage_error_exit_2(dfdoctor):
    p = dfdoctor("check", "--target", "pct://root@pve/abc")
    assert p.returncode == 2 and "VMID" in p.stderr


def test_the_context_carries_the_target_parsed_once(tmp_path):
    ctx, _ = build_context({"target": "LXC://box/"}, ["python3", "/w/t.py"])
    assert ctx.target == Target("lxc", name="box") and str(ctx.target) == "lxc://box"  # one spelling, for reports
    assert not ctx.target.runs_here and ctx.cwd == Path("/w")  # a path there: nothing resolved here
    typed, _ = build_context({}, ["ssh", "-p", "2222", "root@pve", "pct exec 200 -- python3 /w/t.py"])
    assert typed.target == parse_target("pct://root@pve:2222/200")  # the line's hops, parsed as --target is
    given, _ = build_context({"target": "docker://t1"}, ["ssh", "root@pve", "python3 /w/t.py"])
    assert str(given.target) == "docker://t1"  # a --target naming another machine wins over the line's hops
    with pytest.raises(TypeError):  # a spec string would be compared as text again
        Context(target="ssh://gpu1")


def test_a_spec_with_spaces_around_local_is_this_machine(tmp_path, dfdoctor):
    """Compared as text, `--target ' local'` was another machine named ' local': the report said so, and the job's
    folder became "the home folder of the target's user"; parsed, it is this machine, in this folder."""
    (tmp_path / "t.py").write_text("pass\n")
    p = dfdoctor("check", "--only", "log.writable", "--target", " local", "--format", "json", "--", "python3", "t.py",
                 cwd=tmp_path)
    doc = json.loads(p.stdout)
    assert (doc["target"], doc["environment"]["cwd"]) == ("local", str(tmp_path.resolve())), p.stderr


def test_a_launch_line_whose_hops_name_a_malformed_target_is_one_line_exit_2(tmp_path, dfdoctor):
    p = dfdoctor("check", "--", "ssh", "-p", "0", "gpu1", "python3 t.py", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1 and "port must be a number" in p.stderr, p.stderr


def test_wrap_quotes_once_for_ssh_and_not_again_below_it():
    t = parse_target("pct://root@pve:2222/200")
    argv = transport.wrap(t, ["echo", "a b"])
    assert argv[0] == "ssh" and "BatchMode=yes" in argv and argv[argv.index("--") + 1] == "pve"
    assert argv[-1] == "pct exec 200 -- echo 'a b'"
    assert transport.wrap(parse_target("lxc://c1"), ["echo", "a b"]) == ["lxc-attach", "--clear-env", "-n", "c1", "--",
                                                                         "echo", "a b"]
    assert transport.wrap(parse_target("docker://t1"), ["echo", "a b"], tty=True) == ["docker", "exec", "-i", "-t",
                                                                                      "t1", "echo", "a b"]
    assert transport.typed_line(parse_target("ssh://u@h:2222"), "echo 'x'") == "ssh -p 2222 u@h \"echo 'x'\""


# -- real hops ----------------------------------------------------------------------------------------------

def _targets(infra: Infra) -> list[str]:
    return [infra.ssh_target, infra.pct_target, f"lxc://{infra.vmid}"]


def test_hostile_words_arrive_intact_on_every_hop(ssh_config_env):
    infra = ssh_config_env
    pwned = [Path("/tmp/dfdoctor-pwned"), infra.rootfs() / "tmp/dfdoctor-pwned"]
    for p in pwned:
        p.unlink(missing_ok=True)
    for spec in _targets(infra):
        out = run_on_target(Context(target=parse_target(spec)), ["printf", "<%s>\\n", *HOSTILE], timeout=20)
        assert out.returncode == 0, (spec, out.stderr)
        assert out.stdout == "".join(f"<{w}>\n" for w in HOSTILE), spec
    assert not any(p.exists() for p in pwned), "a hop ran a word as a command"


def test_probe_runs_in_the_targets_python_over_stdin(ssh_config_env, tmp_path):
    infra = ssh_config_env
    probe = Path(__file__).parent / "infra" / "echo_probe.py"
    for spec in _targets(infra):
        ctx = Context(target=parse_target(spec), python="python3")
        out = run_probe(ctx, probe, ["a b", "$(x); 'y"], timeout=10, env=dict(os.environ, DFD_TEST_VAR="v 1"))
        assert out.spawn_error is None and out.returncode == 0, (spec, out.stderr)
        assert out.payload["args"] == ["a b", "$(x); 'y"]
        assert out.payload["var"] == "v 1"  # a variable the check set on purpose travels
        assert out.payload["marker"] is None  # dfdoctor's own environment does not
        assert "echo probe ran" in out.stdout
        in_container = spec != infra.ssh_target
        assert out.payload["hostname"] == (infra.vmid if in_container else os.uname().nodename), spec
        # nothing was installed: the probe's temporary folder is gone again
        assert out.payload["dir"].startswith("/tmp/dfdoctor-probe-")
        gone = (infra.rootfs() if in_container else Path("/")) / out.payload["dir"].lstrip("/")
        assert not gone.exists()


def test_hung_remote_probe_gives_stacks_and_leaves_nothing(ssh_config_env):
    infra = ssh_config_env
    probe = Path(__file__).parent / "infra" / "echo_probe.py"
    start = time.monotonic()
    token = f"hang-{os.getpid()}-{time.time_ns()}"
    out = run_probe(Context(target=parse_target(infra.pct_target), python="python3"), probe, ["--hang", token], timeout=1.5)
    assert out.timed_out and out.returncode == -9
    assert "echo_probe.py" in out.stderr and "in <module>" in out.stderr  # faulthandler's stacks came back
    assert time.monotonic() - start < 8
    left = infra.container(f"ps -o args | grep -c '[e]cho_probe.py --hang {token}' || true")
    assert left.stdout.strip() == "0"


def test_remote_probe_killed_when_dfdoctor_goes_away(ssh_config_env):
    """The bootstrap reads EOF on stdin when the local side dies, and kills the probe's whole group."""
    infra = ssh_config_env
    from dfdoctor.targets import remote_probe
    probe = Path(__file__).parent / "infra" / "echo_probe.py"
    argv = transport.wrap(parse_target(infra.pct_target), remote_probe.argv("python3"))
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    token = f"gone-{os.getpid()}-{time.time_ns()}"
    p.stdin.write(remote_probe.request(probe, ["--hang", token], timeout=60, env={}, cwd=None, python=None))
    p.stdin.flush()
    count = f"ps -o args | grep -c '[e]cho_probe.py --hang {token}' || true"
    for _ in range(50):
        if infra.container(count).stdout.strip() != "0":
            break
        time.sleep(0.1)
    else:
        pytest.fail("the probe never started in the container")
    os.killpg(p.pid, 9)
    p.wait()
    for _ in range(50):
        if infra.container(count).stdout.strip() == "0":
            break
        time.sleep(0.1)
    else:
        pytest.fail("the probe outlived the connection")


def test_unreachable_host_is_a_finding_in_sshs_words(dfdoctor, infra):
    p = dfdoctor("check", "--only", "target.reachable", "--target", "ssh://root@127.0.0.1:1", "--python", "python3",
                 "--format", "json", env=infra.env())
    assert p.returncode == 1, p.stderr
    import json
    rec = json.loads(p.stdout)["checks"][0]
    assert rec["status"] == "fail" and "Connection refused" in rec["summary"]


def test_reachable_target_and_missing_python(ssh_config_env, dfdoctor):
    infra = ssh_config_env
    from dfdoctor.checks.target_reachable import target_reachable
    r = target_reachable.run(Context(target=parse_target(infra.pct_target), python="python3"))
    assert r[0].status == Status.OK and r[0].data["python"] == "/usr/bin/python3"
    # issue 39: the target answers, and the interpreter that is there is said (the missing one is imports.smoke's
    # finding); "no python on container 200" beside /usr/bin/python3 read as a dead target
    r = target_reachable.run(Context(target=parse_target(infra.pct_target), python="python9"))
    assert r[0].status == Status.OK and "/usr/bin/python3 (python9 is not there)" in r[0].summary, r[0].summary
    r = target_reachable.run(Context(target=parse_target("lxc://no-such-ct"), python="python3"))
    assert r[0].status == Status.FAIL and "Failed to get" in r[0].summary


def test_shared_connection_opens_and_closes(ssh_config_env):
    infra = ssh_config_env
    t = parse_target(infra.ssh_target)
    assert transport.control_path(t) is None  # no socket outside a connected() block
    with transport.connected(t) as err:
        assert err is None
        sock = transport.control_path(t)
        assert sock and os.path.exists(sock)
        with transport.connected(t) as inner:  # nested: reuses the outer master
            assert inner is None and os.path.exists(sock)
        assert os.path.exists(sock)
        start = time.monotonic()
        for _ in range(5):
            assert run_on_target(Context(target=t), ["true"], timeout=10).returncode == 0
        shared = time.monotonic() - start
    assert not os.path.exists(sock) and transport.SHARED_ENV not in os.environ
    masters = [p for p in psutil.process_iter(["cmdline"]) if sock in " ".join(p.info["cmdline"] or [])]
    assert not masters
    print(f"5 commands over a shared connection: {shared:.2f} s")


def test_two_runs_never_share_or_close_each_others_connection(ssh_config_env):
    """Another dfdoctor run closing its connection must not cut this run's commands (seen with one socket)."""
    infra = ssh_config_env
    t = parse_target(infra.ssh_target)
    code = ("import sys, time; from dfdoctor.targets import parse_target, transport\n"
            "with transport.connected(parse_target(sys.argv[1])):\n    print('up', flush=True); time.sleep(1.5)\n")
    other = subprocess.Popen([sys.executable, "-c", code, str(t)], stdout=subprocess.PIPE, text=True,
                             env=infra.env())
    assert other.stdout.readline().strip() == "up"
    with transport.connected(t):
        slow = run_on_target(Context(target=t), ["sh", "-c", "sleep 2; echo done"], timeout=10)
    other.wait(timeout=10)
    assert slow.returncode == 0 and slow.stdout.strip() == "done", slow.stderr


def test_connected_reports_unreachable_in_sshs_words():
    t = parse_target("ssh://root@127.0.0.1:1")
    with transport.connected(t) as err:
        assert err and "Connection refused" in err


def test_check_chooses_its_checks_while_ssh_logs_in(infra, tmp_path, monkeypatch):
    """`check --target`: the shared connection's login (2 s here) runs beside what needs no target; `ready` returns
    once the master serves, so the checks' workers find it; it is closed when the block ends."""
    from dfdoctor.engine import target_connection_meanwhile

    monkeypatch.setenv("DFDOCTOR_SSH_CONFIG", str(infra.slow_ssh_config(tmp_path, 2)))
    t = parse_target("ssh://root@slow-host")
    began = time.monotonic()
    with target_connection_meanwhile(Context(target=t)) as ready:
        assert time.monotonic() - began < 1.0  # the block runs while ssh is still logging in
        ready()
        assert time.monotonic() - began >= 2.0
        socket = transport.control_path(t)
        assert socket and os.path.exists(socket)
        took = time.monotonic()
        p = run_on_target(Context(target=t), ["true"], timeout=10)
        assert p.returncode == 0 and time.monotonic() - took < 1.5, p.stderr  # over the master: no 2 s login
    assert not os.path.exists(socket)


UNREACHABLE = [("ssh://root@127.0.0.1:1", "Connection refused"),
               ("docker://dfdoctor-no-such-container", "Docker daemon")]


@pytest.mark.parametrize("spec,words", UNREACHABLE, ids=["ssh-refused", "docker-no-daemon"])
def test_an_unreachable_target_is_one_finding(dfdoctor, tmp_path, spec, words):
    """Every check that probes the target fails to get there; the report says it once, in the tool's own
    words, with the fix for that tool; a check run alone still says why it could not look."""
    import json
    if spec.startswith("docker") and not shutil.which("docker"):
        pytest.skip("no docker client on PATH")
    if spec.startswith("docker") and subprocess.run(["docker", "info"], capture_output=True).returncode == 0:
        words = "No such container"  # a daemon runs here: the container is what is missing
    p = dfdoctor("check", "--target", spec, "--python", "python3", "--log", "/workspace/train.log", "--format",
                 "json", "--", "python3", "train.py", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["verdict"]["cause"] == "target-unreachable" and words in doc["verdict"]["summary"], doc["verdict"]
    by_id = {c["id"]: c for c in doc["checks"]}
    assert by_id["target.reachable"]["status"] == "fail"
    # the host filled in, never the placeholder HOST
    assert re.search("docker exec" if spec.startswith("docker") else r"`ssh (-F \S+ )?(-p \d+ )?\S+@\S+ true`",
                     by_id["target.reachable"]["fix"]), by_id["target.reachable"]["fix"]
    problems = [c["id"] for c in doc["checks"] if c["status"] in ("fail", "error", "timeout")]
    assert problems == ["target.reachable"], problems
    for cid in ("imports.smoke", "deps.requirements", "log.writable", "cuda.init"):
        assert by_id[cid]["status"] == "skip" and "see target.reachable" in by_id[cid]["summary"], by_id[cid]
    # without a line of the user's, persistence.session asks the target nothing: skipped for that reason where
    # no connection is opened first (docker), else for the unreachable target
    assert by_id["persistence.session"]["status"] == "skip" and any(
        w in by_id["persistence.session"]["summary"] for w in ("see target.reachable", "no launch line of yours"))
    alone = dfdoctor("check", "--only", "imports.smoke", "--target", spec, "--python", "python3", "--format",
                     "json", "--", "python3", "train.py", cwd=tmp_path)
    rec = json.loads(alone.stdout)["checks"][0]
    assert alone.returncode == 1 and rec["status"] == "error" and rec["cause"] == "target-unreachable"
    assert words in rec["summary"]
    # launch stops before anything is started, and says why
    p = dfdoctor("launch", "--target", spec, "--python", "python3", "--format", "json", "--", "python3",
                 "train.py", cwd=tmp_path)
    rep = json.loads(p.stdout)
    assert p.returncode == 1 and rep["verdict"]["cause"] == "target-unreachable", rep["verdict"]
    assert rep["verdict"]["summary"].startswith("Not launched") and rep["run"]["dir"] is None


def test_provisioning_leaves_no_daemon_holding_its_lock(infra):
    """The daemons provision.sh starts (sshd, lxc, atd, dockerd and the shells that background them) must not
    inherit its lock: one that did made every later provisioning wait 120 s and fail (CI's, then the tests')."""
    import fcntl

    lock = str(infra.dir) + ".lock"
    # Another worker of a parallel run may be provisioning right now, holding the lock or waiting for it: what
    # counts is that the lock can be had. Take it as provision.sh does, waiting as long as it would (120 s); a
    # process that inherited it holds it for good, and is then named.
    with open(lock, "a") as mine:
        end = time.monotonic() + 125
        while True:
            try:
                fcntl.flock(mine, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > end:
                    break
                time.sleep(0.1)
    holders = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == lock:
                    holders.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                continue
    assert not holders, holders


def test_a_child_that_never_reads_its_stdin_cannot_stall_a_probe():
    """A probe's stdin (the remote bootstrap and its payload) is fed without blocking: a child that never reads
    it, like an ssh still connecting or a hung docker daemon, is ended at the deadline like any other."""
    from dfdoctor.command import run_command

    t = time.monotonic()
    out = run_command(["sleep", "30"], timeout=1.0, stdin_data=b"x" * (4 << 20), stack_signal=None)
    assert out.timed_out and time.monotonic() - t < 6
    # and one that reads gets all of it, with stdin closed after (hold_stdin off)
    out = run_command(["wc", "-c"], timeout=10, stdin_data=b"x" * (4 << 20))
    assert out.returncode == 0 and out.stdout.strip() == str(4 << 20)


def test_a_command_that_closed_its_pipes_and_then_finished_is_not_called_killed():
    """coreutils close stdout and stderr in an atexit handler, a moment before the process exits: the group is
    killed only after the command itself ended, so its own exit status is reported (CI once saw `wc -c` as -9)."""
    from dfdoctor.command import run_command

    out = run_command(["sh", "-c", "exec >&- 2>&-; sleep 0.2; exit 3"], timeout=10)
    assert out.returncode == 3 and not out.timed_out
    # one that closes its pipes and keeps running is still ended, soon after
    t = time.monotonic()
    out = run_command(["sh", "-c", "exec >&- 2>&-; sleep 30"], timeout=10)
    assert out.returncode == -9 and time.monotonic() - t < 3


def test_a_probe_of_the_standard_library_alone_starts_without_site_on_a_target_too(ssh_config_env):
    """`run_probe(..., site=False)` (log_probe.py: the probe a target runs most) starts the probe with -S on a
    target as it does here: no site module, no .pth of the target's site-packages; with site, as before."""
    infra = ssh_config_env
    probe = Path(__file__).parent / "infra" / "echo_probe.py"
    for spec in _targets(infra)[:2]:
        ctx = Context(target=parse_target(spec), python="python3")
        for site in (True, False):
            out = run_probe(ctx, probe, ["x"], timeout=10, site=site)
            assert out.spawn_error is None and out.returncode == 0, (spec, out.stderr)
            assert out.payload["args"] == ["x"] and out.payload["no_site"] == (not site), (spec, site, out.payload)
