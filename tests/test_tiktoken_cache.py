"""A job that waits on tiktoken fetching its BPE file, or fails to, on a machine without network: the fix names
tiktoken's own cache (TIKTOKEN_CACHE_DIR, by default data-gym-cache in the temp folder), never the Hugging Face
hub's HF_HUB_OFFLINE, which tiktoken does not read (round 15 named only that). tiktoken is a stand-in with its
file and function names (tests/jobs/tiktoken_standin: the suite's venv must not have the real one); the job, the
proxy that never answers and the failure are real."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from dfdoctor.diagnose import stacks
from jobs.harness import JOBS, PY, job_env, kill_runs, launch, status, text_of

STANDIN = str(JOBS / "tiktoken_standin")


def _without_cache_dir(**extra: str) -> dict[str, str]:
    """The job's environment with none of tiktoken's cache variables, whatever this machine's has."""
    return {k: v for k, v in job_env(**extra).items() if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")}


@pytest.fixture
def work(tmp_path: Path):
    yield tmp_path
    kill_runs(tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(not stacks.py_spy(), reason="py-spy reads whose frames wait on the socket")
def test_a_job_waiting_on_tiktokens_download_is_told_tiktokens_cache_not_the_hubs(work):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)  # the kernel accepts the proxy connection; nobody ever answers its CONNECT
    port = server.getsockname()[1]
    try:
        proxy = f"http://127.0.0.1:{port}"
        env = _without_cache_dir(PYTHONPATH=STANDIN, HTTPS_PROXY=proxy, https_proxy=proxy, NO_PROXY="", no_proxy="")
        proc, rep = launch(work, PY, "-u", str(JOBS / "tiktoken_offline.py"), watch=60, env=env)
    finally:
        server.close()
    v, text = rep["verdict"], text_of(rep)
    assert proc.returncode == 1 and v["state"] == "unknown" and v["cause"] == "waiting-on-network", text
    assert f"waits for data from 127.0.0.1:{port}" in v["summary"], text
    assert "(tiktoken fetches its BPE file: a download)" in v["summary"], text
    assert "TIKTOKEN_CACHE_DIR" in v["fix"] and "data-gym-cache" in v["fix"], v["fix"]
    assert "HF_HUB_OFFLINE" not in v["fix"], v["fix"]
    assert any(e.startswith("no TIKTOKEN_CACHE_DIR in the job's recorded environment") for e in v["evidence"]), text


def test_a_job_whose_tiktoken_download_fails_is_told_tiktokens_cache(work):
    proc, rep = launch(work, PY, "-u", str(JOBS / "tiktoken_offline.py"), watch=30,
                       env=_without_cache_dir(PYTHONPATH=STANDIN, HTTPS_PROXY="", https_proxy=""))  # no host
    v, text = rep["verdict"], text_of(rep)
    assert proc.returncode == 1 and v["cause"] == "download-failed", text
    assert "openaipublic.dfdoctor.invalid" in v["summary"], text
    assert "TIKTOKEN_CACHE_DIR" in v["fix"] and "HF_HUB_OFFLINE" not in v["fix"], v["fix"]
    assert any(e.startswith("no TIKTOKEN_CACHE_DIR in the job's recorded environment") for e in v["evidence"]), text


def test_the_cache_folder_the_job_had_is_kept_in_its_record_and_named_by_status(work):
    """TIKTOKEN_CACHE_DIR (and DATA_GYM_CACHE_DIR, which tiktoken reads next) are kept in the record's environment
    as the HF_ variables are (round 16 named the variable in the fix, but the record dropped it, so `status` could
    not say whether the job had it): the verdict names the folder the job had, and that the file was not found
    there in a form tiktoken takes (it downloads only then); an empty value, which turns tiktoken's cache off."""
    cache = work / "bpe-cache"
    cache.mkdir()
    env = job_env(PYTHONPATH=STANDIN, HTTPS_PROXY="", https_proxy="", TIKTOKEN_CACHE_DIR=str(cache))
    proc, rep = launch(work, PY, "-u", str(JOBS / "tiktoken_offline.py"), watch=30, env=env)
    assert proc.returncode == 1 and rep["verdict"]["cause"] == "download-failed", text_of(rep)
    from dfdoctor.run import record
    spawned = record.load(Path(rep["run"]["dir"])).spawned or {}
    assert spawned["env"].get("TIKTOKEN_CACHE_DIR") == str(cache), spawned.get("env")
    _, later = status(work, Path(rep["run"]["dir"]).name)
    for v in (rep["verdict"], later["verdict"]):
        assert f"TIKTOKEN_CACHE_DIR={str(cache)!r} in the job's environment" in v["evidence"], v["evidence"]
        assert f"The job has TIKTOKEN_CACHE_DIR={cache}, and tiktoken did not find the file there" in v["fix"], v["fix"]
        assert f"copy what it writes into {cache} on this machine (not tried)" in v["fix"], v["fix"]
        assert "HF_HUB_OFFLINE" not in v["fix"], v["fix"]
    env = job_env(PYTHONPATH=STANDIN, HTTPS_PROXY="", https_proxy="", TIKTOKEN_CACHE_DIR="")
    proc, rep = launch(work, PY, "-u", str(JOBS / "tiktoken_offline.py"), watch=30, env=env)
    v = rep["verdict"]
    assert proc.returncode == 1 and v["cause"] == "download-failed", text_of(rep)
    assert "The job has TIKTOKEN_CACHE_DIR set empty, which turns tiktoken's cache off" in v["fix"], v["fix"]
