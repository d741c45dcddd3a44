"""The config is type-checked: every key that holds something else than it expects is exit 2 naming the key and
what it expects, never read another way (a string `skip = "cuda.*"` once skipped every check: `*` matched all)."""

from __future__ import annotations

import json
import math
import os
import string
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_dfdoctor
from dfdoctor.config import ConfigError, load
from support.in_process import run_here

# key, a wrong value (as TOML), words the error must contain
WRONG = [
    ("fail-on", '"never"', '"error" or "warn"'),
    ("fail-on", "1", '"error" or "warn"'),
    ("timeout", "-5", "greater than 0"),
    ("timeout", "0", "greater than 0"),
    ("timeout", '"60"', "a number of seconds"),
    ("timeout", "nan", "a number of seconds"),
    ("timeout", "true", "a number of seconds"),
    ("only", '"log.*"', "an array of check-id globs"),
    ("only", "[1]", "an array of check-id globs"),
    ("skip", '"cuda.*"', "an array of check-id globs"),
    ("skip", '[""]', "an array of check-id globs"),
    ("silence", '"log.writable"', "an array of tables"),
    ("checks", '"log.writable"', "a table of check ids"),
    ("watch", "-1", "0 or more"),
    ("watch", '"60"', "0 or more"),
    ("keep-runs", "0", "a whole number, 1 or more"),
    ("keep-runs", "2.5", "a whole number, 1 or more"),
]


@pytest.mark.parametrize("key, value, expects", WRONG)
def test_each_key_refuses_a_wrong_value_naming_key_and_expectation(tmp_path, key, value, expects):
    (tmp_path / "dfdoctor.toml").write_text(f"{key} = {value}\n")
    with pytest.raises(ConfigError) as exc:
        load(tmp_path)
    assert f"{key} must be" in str(exc.value) and expects in str(exc.value), exc.value


@pytest.mark.parametrize("body, words", [
    ('silence = [{check = "log.writable", reason = 5}]', "silence[0].reason must be a string"),
    ('silence = [{check = ["log.*"], reason = "x"}]', "silence[0].check must be a string"),
    ('silence = [{check = "log.*", reson = "typo"}]', "unknown key reson"),
    ('silence = ["log.writable"]', "silence[0] needs a check"),
    ('[checks]\n"log.writable" = 5', 'checks."log.writable" must be a table'),
    ('[checks."log.writable"]\ntimeout = -5', 'checks."log.writable".timeout must be a number of seconds greater'),
    ('[checks."my.plugin"]\ntimeout = "soon"', 'checks."my.plugin".timeout must be a number of seconds'),
    ('[checks."log.writable"]\nmin_free_mb = "lots"', 'min_free_mb must be a number of MiB'),
    ('[checks."cuda.init"]\nexpect_gpu = "no"', "expect_gpu must be true or false"),
    ('[checks."cuda.nccl"]\nworld_size = 0', "world_size must be a whole number, 1 or more"),
    ('[checks."compile.race"]\nreproduce = "sometimes"', 'reproduce must be "auto" or "always" or "never"'),
    ('[checks."persistence.session"]\nstrategies = "tmux"', "strategies must be an array of strategy names"),
    ('tool = 3', "tool must be a table"),
])
def test_nested_values_are_checked_too(tmp_path, body, words):
    (tmp_path / "dfdoctor.toml").write_text(body + "\n")
    with pytest.raises(ConfigError) as exc:
        load(tmp_path)
    assert words in str(exc.value), exc.value


def test_right_values_load(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.dfdoctor]\nfail-on = 'warn'\ntimeout = 2.5\nonly = []\nskip = ['cuda.*']\nwatch = 0\n"
        "keep-runs = 3\nsilence = [{cause = 'output-buffered', reason = 'we know'}]\n"
        "[tool.dfdoctor.checks.'log.writable']\ntimeout = 5\nmin_free_mb = 0\n"
        "[tool.dfdoctor.checks.'my.plugin']\nanything = 'goes'\n")
    cfg = load(tmp_path)
    assert cfg.get("skip") == ["cuda.*"] and cfg.silences[0].reason == "we know"


def test_skip_as_a_string_no_longer_passes_the_gate(tmp_path):
    """`skip = "cuda.*"` was read letter by letter: `*` skipped every check and a failing launch said OK."""
    (tmp_path / "dfdoctor.toml").write_text('skip = "cuda.*"\n')
    res = run_dfdoctor("check", "--log", "no/such/dir/x.log", "--", "python3", "-c", "pass", cwd=tmp_path)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stderr.strip().count("\n") == 0 and "skip must be an array of check-id globs" in res.stderr


@pytest.mark.parametrize("config, args", [
    ("timeout = -5\n", []),
    ('[checks."log.writable"]\ntimeout = -5\n', []),
    ("", ["--timeout", "0"]),
    ("", ["--timeout", "-5"]),
    ("", ["--timeout", "nan"]),
])
def test_a_timeout_of_zero_or_less_is_refused_not_hung_on(tmp_path, config, args):
    """`timeout = -5` hung `check` for ever (a worker stopped before its setpgid was never killed)."""
    (tmp_path / "dfdoctor.toml").write_text(config)
    res = run_dfdoctor("check", *args, "--only", "log.writable", "--log", "x.log", "--", "python3", "-c", "pass",
                       cwd=tmp_path, timeout=30)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "timeout" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_a_worker_past_its_deadline_at_once_is_killed_and_reaped(tmp_path):
    """The runner itself, given a deadline already past (a plugin's own timeout=-5): it returns a timeout record
    and reaps its worker, whatever state the worker was caught in. Run in a subprocess: the old runner hung."""
    code = """
import sys, time
from pathlib import Path
from dfdoctor.context import Context
from dfdoctor.registry import Check
from dfdoctor import runner
runner.MIN_TIMEOUT_S = -10.0  # the floor off: the deadline has passed before the worker even starts
def slow(ctx):
    time.sleep(60)
    return []
for i in range(20):
    recs = runner.run_checks([Check("slow.one", "slow", ("pre",), -5.0, slow)], Context(cwd=Path(".")), "pre")
    assert recs[0].status.value == "timeout", recs
print("reaped")
"""
    import subprocess
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.returncode == 0 and "reaped" in res.stdout, res.stderr[-2000:]


# ---- property: arbitrary TOML values never make dfdoctor crash (exit 3) -------------------------------------

KEYS = ["fail-on", "timeout", "only", "skip", "silence", "checks", "watch", "keep-runs"]
CHECK_IDS = ["log.writable", "cuda.init", "cuda.nccl", "compile.race", "persistence.session", "imports.smoke",
             "my.plugin"]
OPTIONS = ["timeout", "min_free_mb", "warn_free_mb", "min_free_inodes", "expect_gpu", "backend", "world_size",
           "hang_rank", "fail_rank", "reproduce", "runs", "threads", "deadline", "cache_days", "device",
           "strategies", "other"]

scalars = st.one_of(
    st.booleans(), st.integers(min_value=-2**63, max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["error", "warn", "auto", "never", "always", "cuda.*", "*", "log.writable", "nccl", "race"]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(["check", "cause", "reason", "x"] + OPTIONS), inner, max_size=4)),
    max_leaves=8)


def toml_value(v) -> str:
    """A Python value written as TOML (inline tables and arrays)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return '"' + "".join(c if c in string.printable and c not in '"\\\n\r\t\x0b\x0c' else f"\\u{ord(c):04x}"
                             for c in v) + '"'
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f'"{k}" = {toml_value(x)}' for k, x in v.items()) + "}"


documents = st.fixed_dictionaries({}, optional={
    **{k: values for k in KEYS},
    "checks": st.dictionaries(st.sampled_from(CHECK_IDS), st.one_of(
        st.dictionaries(st.sampled_from(OPTIONS), values, max_size=4), scalars), max_size=3),
    "unknown-key": values,
})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=documents)
def test_any_config_is_used_or_refused_never_a_crash(tmp_path, doc):
    """Whatever the config holds, every place that reads it either works or gives a usage error (exit 2)."""
    from dfdoctor.context import Context
    from dfdoctor.engine import build_context, check_selection, fail_on
    from dfdoctor.errors import UsageError
    from dfdoctor.registry import discover
    from dfdoctor.runner import effective_timeout

    (tmp_path / "dfdoctor.toml").write_text("".join(f'"{k}" = {toml_value(v)}\n' for k, v in doc.items()))
    try:
        ctx, cfg = build_context({"cwd": str(tmp_path)}, ["python3", "-c", "pass"])
        check_selection({}, cfg)
    except UsageError:
        return
    assert fail_on({}, cfg) in ("error", "warn")
    float(cfg.get("watch", 60.0))
    assert int(cfg.get("keep-runs", 20)) >= 1
    for chk in discover()[0]:
        limit = effective_timeout(chk, ctx)
        assert math.isfinite(limit) and limit > 0
    for key, v in doc.items():  # a key kept must hold what it promises: a list of strings stays a list of strings
        if key in ("only", "skip"):
            assert isinstance(v, list) and all(isinstance(x, str) for x in v)
    assert isinstance(Context(cwd=Path(".")).config, dict)


# --- round 3 of do-no-harm: git's CVE-2022-24765 answer for the config walk-up -----------------------------------

NOBODY = 65534
SILENCE_ALL = 'silence = [{check = "*", reason = "planted"}]\n'


def _shared_tree(tmp_path: Path, mode: int = 0o1777, owner_of_config: int = NOBODY) -> Path:
    """tmp/shared (a folder others may write, with `mode`) holding a config of `owner_of_config`, and below it a
    project folder of the user's with a script that fails imports.smoke."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    cfg = shared / "dfdoctor.toml"
    cfg.write_text(SILENCE_ALL)
    os.chown(cfg, owner_of_config, owner_of_config)
    proj = shared / "proj"
    proj.mkdir()
    (proj / "broken.py").write_text("import nosuchmodule_xyz\n")
    return proj


def test_a_config_planted_by_another_user_in_a_sticky_folder_is_skipped_and_named(tmp_path):
    proj = _shared_tree(tmp_path)
    cfg = load(proj)
    assert cfg.path is None and cfg.values == {}
    assert cfg.skipped == [f"{proj.parent / 'dfdoctor.toml'}: owned by nobody (uid {NOBODY}), not by you or root"]
    r = run_dfdoctor("check", "--only", "imports.smoke", "--", "python3", "broken.py", cwd=proj)
    assert r.returncode == 1, r.stdout + r.stderr  # the broken import is not silenced by the planted file
    assert f"config not used: {proj.parent / 'dfdoctor.toml'}: owned by nobody" in r.stdout
    r = run_here("check", "--only", "imports.smoke", "--format", "json", "--", "python3", "broken.py", cwd=proj)
    doc = json.loads(r.stdout)  # that json through the same entry here (support/in_process)
    assert "config" not in doc["environment"]
    assert doc["environment"]["config_skipped"] == cfg.skipped


def test_the_users_own_config_in_that_folder_is_still_read(tmp_path):
    proj = _shared_tree(tmp_path, owner_of_config=os.geteuid())
    assert load(proj).path == proj.parent / "dfdoctor.toml"


def test_a_symlink_planted_by_another_user_to_a_root_file_is_skipped(tmp_path):
    proj = _shared_tree(tmp_path, owner_of_config=os.geteuid())
    real = tmp_path / "root.toml"
    (proj.parent / "dfdoctor.toml").rename(real)
    (proj.parent / "dfdoctor.toml").symlink_to(real)
    os.lchown(proj.parent / "dfdoctor.toml", NOBODY, NOBODY)
    assert load(proj).path is None


@pytest.mark.parametrize("mode, group, why", [
    (0o1777, None, "everyone may write it (sticky, as /tmp)"),
    (0o777, None, "everyone may write it"),
    (0o775, NOBODY, f"group {NOBODY} may write it"),
])
def test_the_walk_stops_at_a_folder_others_may_write(tmp_path, mode, group, why):
    (tmp_path / "dfdoctor.toml").write_text(SILENCE_ALL)  # the user's own, but above the open folder
    open_ = tmp_path / "open"
    open_.mkdir()
    open_.chmod(mode)
    if group is not None:
        os.chown(open_, -1, group)
    proj = open_ / "proj"
    proj.mkdir()
    cfg = load(proj)
    assert cfg.path is None
    assert cfg.skipped == [f"not looked above {open_}: {why}"]


def test_a_huge_or_device_config_is_refused_with_the_reason(tmp_path):
    big = tmp_path / "dfdoctor.toml"
    with open(big, "wb") as f:
        f.truncate(3 << 30)  # sparse: 3 GB that cost no disk
    with pytest.raises(ConfigError, match="larger than 8 MiB"):
        load(tmp_path)
