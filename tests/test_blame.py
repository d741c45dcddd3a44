"""Every verdict built from a traceback blames the job's own line (the deepest frame outside the standard library
and installed packages); the library frame stays as evidence; no fix asks the user to edit a library."""

from __future__ import annotations

from pathlib import Path

import pytest

from dfdoctor import causes
from dfdoctor.diagnose.blame import blame_fix
from dfdoctor.diagnose.traceback import parse_python_error
from jobs.harness import job, kill_runs, launch

JOBS = Path(__file__).parent / "jobs"

STDLIB = """Traceback (most recent call last):
  File "/srv/proj/train.py", line 11, in <module>
    config = load_config('{"lr": 0.1,}')
  File "/srv/proj/train.py", line 7, in load_config
    return json.loads(text)
           ^^^^^^^^^^^^^^^^
  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads
    return _default_decoder.decode(s)
  File "/usr/lib/python3.11/json/decoder.py", line 353, in raw_decode
    obj, end = self.scan_once(s, idx)
json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 13 (char 12)
"""


def test_the_deepest_frame_of_the_users_own_files_is_blamed_with_its_code():
    err = parse_python_error(STDLIB)
    assert err.user_frame == ("/srv/proj/train.py", 7) and err.user_code == "return json.loads(text)"
    assert err.in_library and err.file.endswith("json/decoder.py")
    assert "/srv/proj/train.py, line 7 (`return json.loads(text)`)" == err.blame
    fix = blame_fix(err)
    assert "train.py, line 7" in fix and "Fix the error raised at" not in fix


def test_exec_of_the_jobs_own_text_is_the_jobs_code():
    err = parse_python_error('Traceback (most recent call last):\n  File "/p/train.py", line 3, in <module>\n'
                             "    exec(open('configurator.py').read())\n  File \"<string>\", line 9, in <module>\n"
                             "ValueError: bad override\n")
    assert err.user_frame == ("<string>", 9)


@pytest.fixture
def work(tmp_path):
    yield tmp_path
    kill_runs(tmp_path)


@pytest.mark.slow
def test_a_library_raising_on_the_jobs_input_blames_the_jobs_line(work):
    _, rep = launch(work, *job("stdlib_raises.py"), watch=20)
    v = rep["verdict"]
    assert v["cause"] == causes.CRASHED, v
    assert "stdlib_raises.py, line 7 (`return json.loads(text)`)" in v["summary"], v["summary"]
    assert "decoder.py" not in v["fix"] and "stdlib_raises.py, line 7" in v["fix"], v["fix"]
    assert any(e.startswith("raised inside") and "json/decoder.py" in e for e in v["evidence"]), v["evidence"]


@pytest.mark.slow
def test_a_self_opened_log_in_a_missing_folder_is_log_dir_missing_at_the_jobs_line(work):
    _, rep = launch(work, *job("own_log_missing_dir.py"), watch=20, log=None)
    v = rep["verdict"]
    assert v["cause"] == causes.LOG_DIR_MISSING, v
    assert f"{JOBS / 'own_log_missing_dir.py'}, line 6" in v["summary"], v["summary"]
    assert f"mkdir -p {work / 'outputs' / 'run7'}" in v["fix"], v["fix"]
    assert "logging/__init__.py" not in v["summary"] + v["fix"]


def test_an_error_raised_by_the_venvs_torchrun_points_at_the_launch_options_not_at_the_launcher_script():
    err = parse_python_error('Traceback (most recent call last):\n  File "/w/.venv/bin/torchrun", line 8, in '
                             '<module>\n    sys.exit(main())\n  File "/w/.venv/lib/python3.11/site-packages/torch/'
                             'distributed/run.py", line 900, in main\n    run(args)\nValueError: Unsupported '
                             'nproc_per_node value: gpu\n')
    fix = blame_fix(err)
    assert "launcher torchrun itself" in fix and "nproc_per_node value: gpu" in fix, fix
    assert "/w/.venv/bin" not in fix and "site-packages" not in fix, fix
