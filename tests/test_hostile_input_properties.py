"""Property-based tests (hypothesis) for what takes hostile input: shell quoting through a real shell and a real
ssh hop, and target parsing. Example counts stay modest: each shell example is a real process."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dfdoctor.cli.main import run
from dfdoctor.shell import join, quote
from dfdoctor.targets import parse_target
from infra.fixtures import infra  # noqa: F401

# NUL cannot be in an argv word (execve ends the word there), so it is the one byte no quoting can carry.
WORD = st.binary(max_size=24).filter(lambda b: b"\0" not in b).map(lambda b: b.decode("utf-8", "surrogateescape"))
PRINTF_ARGS = "for a in \"$@\"; do printf '%s\\0' \"$a\"; done"


def _words_back(stdout: bytes) -> list[str]:
    return [w.decode("utf-8", "surrogateescape") for w in stdout.split(b"\0")[:-1]]


def _sh_argv(line: str) -> list:
    return ["sh", "-c", f"set -- {line}; {PRINTF_ARGS}"]


def test_trailing_newline_and_other_unsafe_words_are_quoted():
    for word in ("abc\n", "a b", "", "~", "x;y", "$HOME", "a\tb", "*", "\\t", "é"):
        assert quote(word) != word, repr(word)
    assert quote("train.py") == "train.py" and quote("--lr=0.1") == "--lr=0.1"


@settings(max_examples=60, deadline=None)
@given(st.lists(WORD, min_size=1, max_size=5))
@example(["train.py\n"])  # `$` matched before a trailing newline: the word went out unquoted
def test_join_reads_back_as_the_same_words_through_sh(words):
    encoded = [w.encode("utf-8", "surrogateescape") for w in words]
    line = join(words).encode("utf-8", "surrogateescape")
    out = subprocess.run([b"sh", b"-c", b"set -- " + line + b"; " + PRINTF_ARGS.encode()], capture_output=True,
                         timeout=10)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(b"\0")[:-1] == encoded


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(WORD, min_size=1, max_size=4))
def test_quote_survives_an_ssh_hop_to_sh(infra, words):  # noqa: F811
    """`ssh host 'sh -c LINE'` as dfdoctor builds it: the remote login shell reads the outer quoting, sh the inner."""
    encoded = [w.encode("utf-8", "surrogateescape") for w in words]
    inner = b"set -- " + join(words).encode("utf-8", "surrogateescape") + b"; " + PRINTF_ARGS.encode()
    remote = b"sh -c " + quote(inner.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
    argv = [a.encode() for a in infra.ssh_argv()] + [remote]
    out = subprocess.run(argv, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(b"\0")[:-1] == encoded


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
@example("ssh://h:\u0661\u0662")  # Arabic-Indic digits: isdigit() and int() took them as port 12
@example("pct://h/\u0662\u0660\u0660")
@example("ssh://u\n@h")
def test_parse_target_only_accepts_or_raises_valueerror(spec):
    """Whatever is accepted is what was written: it prints back to a spec that parses to the same target, and
    its port and VMID are the ASCII digits of the spec itself."""
    try:
        t = parse_target(spec)
    except ValueError:
        return
    assert parse_target(str(t)) == t
    if t.user is not None:
        assert t.user in spec and t.user.isprintable()
    if t.port is not None:
        assert str(t.port) in spec
    if t.vmid is not None:
        assert t.vmid.isascii() and t.vmid.isdigit()


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.text(max_size=30), st.sampled_from(["ssh://h:\u0661\u0662", "pct://h/\u0662\u0660\u0660",
                                                        "lxc://c\n", "ssh://h:22\n/x", "ssh://h:\u00b2"])))
def test_target_parsing_never_exits_3(spec):
    # `--only` naming no check ends the run (exit 2) right after the target is parsed: nothing connects anywhere
    rc = run(["check", "--only", "no.such.check", "--target", spec, "--format", "json", "--output", "/dev/null"])
    assert rc == 2


def test_unicode_digits_are_not_ports_or_vmids():
    for spec in ("ssh://h:\u0661\u0662", "pct://h/\u0662\u0660\u0660", "pct://h:\uff12\uff12/200",
                 "ssh://h:\u00b2", "lxc://c\nx", "ssh://u\n@h", "docker://a\n/b"):
        with pytest.raises(ValueError):
            parse_target(spec)
