"""The rule every check lives under: a static reading may warn; only an observation may fail or block a launch."""

from __future__ import annotations

from dfdoctor import causes
from dfdoctor.engine import launch_blockers
from dfdoctor.model import OBSERVED, STATIC, STATIC_NOTE, CheckRecord, Result, Status, fail, warn


def test_a_static_fail_is_a_warn_that_says_why() -> None:
    r = fail("script not found: /x/train.py", causes.COMMAND_NOT_FOUND, details="read from run.sh", basis=STATIC)
    assert r.status == Status.WARN and r.basis == STATIC and not r.observed
    assert r.details.startswith("read from run.sh\n") and STATIC_NOTE in r.details
    assert Result(Status.FAIL, "x", basis=STATIC).status == Status.WARN  # however it is built
    assert fail("seen").status == Status.FAIL and fail("seen").basis == OBSERVED


def test_basis_survives_json_and_old_reports_read_as_observed() -> None:
    r = warn("read", basis=STATIC)
    assert Result.from_dict(r.to_dict()).basis == STATIC
    old = {k: v for k, v in fail("seen", causes.SYNTAX_ERROR).to_dict().items() if k != "basis"}
    assert Result.from_dict(old).basis == OBSERVED and Result.from_dict(old).status == Status.FAIL
    rec = CheckRecord.from_results("imports.smoke", "pre", "t", [warn("read", basis=STATIC)], 0.1)
    assert CheckRecord.from_dict(rec.to_dict()).basis == STATIC


def test_launch_blocks_only_on_observed_findings() -> None:
    seen = CheckRecord("imports.smoke", "pre", Status.FAIL, "script not found", cause=causes.COMMAND_NOT_FOUND)
    read = CheckRecord("launch.path", "pre", Status.ERROR, "a reading", cause=causes.COMMAND_NOT_FOUND, basis=STATIC)
    other = CheckRecord("cuda.init", "pre", Status.FAIL, "no GPU", cause=causes.CUDA_UNAVAILABLE)
    assert launch_blockers([seen, read, other]) == [seen]
    seen.silenced = "config"
    assert launch_blockers([seen, read]) == []


def test_text_output_marks_a_static_reading() -> None:
    from dfdoctor.render.text import _check_lines
    rec = CheckRecord.from_results("launch.path", "pre", "t", [fail("the log lands elsewhere", causes.LOG_ELSEWHERE,
                                                                    basis=STATIC)], 0.1)
    assert "(static reading)" in _check_lines(rec, 12, 100, False, False)[0] and rec.status == Status.WARN
    seen = CheckRecord.from_results("imports.smoke", "pre", "t", [fail("no module", causes.MISSING_MODULE)], 0.1)
    assert "static" not in _check_lines(seen, 12, 100, False, False)[0]


def test_an_import_failing_in_a_guessed_interpreter_is_a_lead(tmp_path) -> None:
    """The launcher picks its interpreter in a way the walk cannot follow: the imports are tried in python3,
    and what fails there is not an observation about the job unless --python names its interpreter."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "train.py").write_text("import dfdoctor_no_such_module_xyz\n")
    (tmp_path / "run.sh").write_text('PY=$(ls -d /opt/envs/* | head -1)/bin/python\nexec "$PY" train.py\n')
    dfd = str(Path(sys.executable).parent / "dfdoctor")
    for extra, status, code in (([], "warn", 0), (["--python", sys.executable], "fail", 1)):
        p = subprocess.run([dfd, "check", "--cwd", str(tmp_path), "--only", "imports.smoke", *extra, "--format",
                            "json", "--", "bash", "run.sh"], capture_output=True, text=True, timeout=120)
        rec = json.loads(p.stdout)["checks"][0]
        assert p.returncode == code and rec["status"] == status and rec["cause"] == causes.MISSING_MODULE, p.stdout
        assert (rec["basis"] == "static") == (not extra)
        if not extra:
            assert "could not be resolved" in rec["details"] and "--python" in rec["details"]
