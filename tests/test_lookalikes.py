"""dfdoctor on projects written in the styles of public training code it was never tuned to (tests/lookalikes/,
its README names the style each follows): a hydra template that puts its root on sys.path at run time, a dcgan-like
argparse GAN with a model registry, a `fire` CLI. Each is run as its README would run it, broken the way users
break it, through a real `dfdoctor launch` (or `check`), on synthetic data made here; the healthy launch must be
neither blocked nor failed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from dfdoctor import causes
from jobs.harness import PY, dfdoctor, job_env, kill_runs, launch, launch_to_end
from support.made_once import session_folder
from support.torch_data import torch_data

LOOKALIKES = Path(__file__).resolve().parent / "lookalikes"
pytestmark = pytest.mark.slow


# The file's data (torch.save files) come from support/torch_data.py: one interpreter that imports torch makes the
# suite's data files, once per run of the suite (an import of torch, ~1.3 CPU-s, for each of six tests before, then
# one for this file's, another for test_corpus's). The session folder it is made in is set by `_session` below.
_SESSION: dict[str, Path] = {}


@pytest.fixture(scope="module", autouse=True)
def _session(tmp_path_factory):
    _SESSION["folder"] = session_folder(tmp_path_factory)
    yield
    _SESSION.clear()


def _made(name: str) -> Path:
    """One of support/torch_data.py's files ("tiny/train.pt", "val-split/train.pt")."""
    return torch_data(_SESSION["folder"], name)


def _tiny_tensors(work: Path) -> None:
    """data/train.pt as the hydra template's TinyData reads it: 64 rows of 8 features and a 0/1 label."""
    (work / "data").mkdir(exist_ok=True)
    shutil.copyfile(_made("tiny/train.pt"), work / "data" / "train.pt")


def _data_folder(work: Path) -> None:
    (work / "data").mkdir(exist_ok=True)


def _misindented_config(work: Path) -> None:
    """configs/data/tiny.yaml with batch_size indented under data_dir's plain value, as a hand edit leaves it."""
    _tiny_tensors(work)
    (work / "configs/data/tiny.yaml").write_text("data_dir: ${oc.env:PROJECT_ROOT}/data\n  batch_size: 16\n")


@dataclass(frozen=True)
class Case:
    id: str
    project: str
    argv: tuple[str, ...]
    cause: str
    prepare: tuple = ()
    said: tuple[str, ...] = ()  # in the summary or the evidence
    fix: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


CASES = [
    # ---- hydra template: `python src/train.py` from the project's root ------------------------------------------
    Case("hydra-override-of-an-absent-key", "hydra-template", (PY, "src/train.py", "data.batchsize=8"),
         causes.BAD_ARGUMENTS, (_tiny_tensors,), said=("data.batchsize", "configs/data/tiny.yaml:2"),
         fix=("data.batch_size=8 instead of data.batchsize=8",)),
    Case("hydra-override-of-an-absent-key-full-error", "hydra-template", (PY, "src/train.py", "data.batchsize=8"),
         causes.BAD_ARGUMENTS, (_tiny_tensors,), said=("data.batchsize",),
         fix=("data.batch_size=8 instead of data.batchsize=8",), env=(("HYDRA_FULL_ERROR", "1"),)),
    Case("hydra-group-option-missing", "hydra-template", (PY, "src/train.py", "trainer=gpus"), causes.BAD_ARGUMENTS,
         (_tiny_tensors,), said=("trainer=gpus", "cpu, gpu"), fix=("trainer=gpu instead of trainer=gpus",)),
    Case("hydra-yaml-indentation", "hydra-template", (PY, "src/train.py"), causes.CONFIG_INVALID,
         (_misindented_config,), said=("configs/data/tiny.yaml", "line 2", "data=tiny", "configs/train.yaml:2"),
         fix=("configs/data/tiny.yaml at line 2",)),
    # ---- dcgan-like GAN: `python main.py --dataset fake --device cpu` -------------------------------------------
    Case("gan-choice-typo", "gan", (PY, "main.py", "--device", "cpu", "--dataset", "mnst"), causes.BAD_ARGUMENTS,
         said=("--dataset",), fix=("--dataset mnist instead of --dataset mnst",)),
    Case("gan-value-the-code-asserts-on", "gan", (PY, "main.py", "--device", "cpu", "--imageSize", "20"),
         causes.BAD_ARGUMENTS, said=("--imageSize 20", "main.py, line 21"),
         fix=("Give --imageSize a value for which `opt.imageSize % 16 == 0` holds", "default 16", "main.py:13")),
    Case("gan-model-the-registry-lacks", "gan", (PY, "main.py", "--device", "cpu", "--netG", "dcgann"),
         causes.BAD_ARGUMENTS, said=("--netG dcgann", "Unknown model (dcgann)", "main.py, line 30"),
         fix=("--netG dcgan instead of --netG dcgann", "mlp")),
    Case("gan-data-folder-typo", "gan", (PY, "main.py", "--device", "cpu", "--dataset", "folder", "--dataroot",
                                         "./dta"), causes.INPUT_MISSING, (_data_folder,), said=("./dta",),
         fix=("--dataroot ./data instead of --dataroot ./dta",)),
    # ---- LightningCLI-style jsonargparse keys: `python main.py --trainer.max_epochs=2` -------------------------
    Case("jsonargparse-unknown-trainer-key", "lightning-cli", (PY, "main.py", "--trainer.gpus=1"),
         causes.BAD_ARGUMENTS, said=("main.py's parser does not know --trainer.gpus=1",),
         fix=("--trainer.devices=1 instead of --trainer.gpus=1",)),
    # ---- a trainer whose --device defaults to cuda, on this CPU-only torch: `python train.py --epochs 2` --------
    Case("cuda-default-seeded-generator", "cuda-default", (PY, "train.py", "--epochs", "2"), causes.CUDA_UNAVAILABLE,
         said=("train.py, line 13", "--device (default 'cuda')"), fix=("add --device cpu",)),
    # ---- mnist-like: the data set downloads itself into --data-dir at start; this machine has no network --------
    # the URL is computed (mirror + name) and printed on stdout only (`Downloading https://...`): read from there
    Case("offline-download-at-start", "download-at-start", (PY, "main.py", "--epochs", "1"), causes.DOWNLOAD_FAILED,
         said=("digits.py, line 39", "main.py:19 asks for the download (download=True) into the data folder "
               "--data-dir names (../data, its default)",
               "the job printed https://tiny-digits.invalid/tiny-digits.pt before it failed"),
         fix=("Fetch https://tiny-digits.invalid/tiny-digits.pt where there is network",
              "put them in the data folder --data-dir names (now ../data, its default)")),
    # ---- build-nanogpt-like: its eval helper loads a tokenizer at import, fetched with requests (tiktoken's way) --
    Case("offline-tokenizer-at-import", "encoding-at-import", (PY, "train_gpt2.py"), causes.DOWNLOAD_FAILED,
         said=("the error names https://bpe-files.invalid/gpt-2/encodings/main/vocab.bpe",),
         fix=("Fetch https://bpe-files.invalid/gpt-2/encodings/main/vocab.bpe where there is network",)),
    # ---- timm-like: `./distributed_train.sh 2 ARGS` runs torchrun --nproc_per_node=$NUM_PROC; --device cuda ------
    Case("launcher-script-on-a-cpu-machine", "launcher-script",
         ("./distributed_train.sh", "2", "--data-dir", "data", "--epochs", "1"), causes.NCCL_FAILED, (_tiny_tensors,),
         said=("distributed_train.sh's argument 1 (2 here) is the --nproc_per_node of the torchrun line it runs",),
         fix=("start one process, which forms no process group, the project's own way: `./distributed_train.sh 1 "
              "--data-dir data --epochs 1 --device cpu`", "add --dist-backend gloo to the command and --device cpu",
              "not try"),
         env=(("PATH", f"{Path(PY).parent}:{os.environ.get('PATH', '')}"),)),
    # ---- a fire CLI: `python train.py --lr=0.05 --epochs=3` ---------------------------------------------------
    Case("fire-flag-typo", "fire-cli", (PY, "train.py", "--epoch=3", "--lr=0.05"), causes.BAD_ARGUMENTS,
         said=("--epoch=3", "epochs=2, its default"), fix=("--epochs=3 instead of --epoch=3", "train.py:6")),
]


def _work(tmp_path: Path, project: str) -> Path:
    work = tmp_path / project
    shutil.copytree(LOOKALIKES / project, work)
    return work


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_broken_run_is_named_in_the_projects_terms(case: Case, tmp_path):
    work = _work(tmp_path, case.project)
    for step in case.prepare:
        step(work)
    try:
        proc, rep = launch_to_end(work, *case.argv, watch=40, log=None, env=job_env(**dict(case.env)))
        v = rep["verdict"]
        said = "\n".join([v["summary"], *v["evidence"]])
        assert v["cause"] == case.cause, (v["cause"], v["summary"], v["fix"])
        for text in case.said:
            assert text in said, (text, said)
        for text in case.fix:
            assert text in v["fix"], (text, v["fix"])
    finally:
        kill_runs(work)


def test_a_root_put_on_sys_path_at_run_time_passes_check_and_launches(tmp_path):
    """The hydra template's src/train.py calls rootutils.setup_root(__file__, pythonpath=True) before `from src.data
    import ...`: imports.smoke failed it with No module named 'src' and `launch` refused the README's own command.
    The launch's own checks are `check`'s (every pre-launch check, in its report's "checks"): read there, not in a
    `dfdoctor check` run before it, which imported the job, torch with it, a second time (~1.5 CPU-s)."""
    work = _work(tmp_path, "hydra-template")
    _tiny_tensors(work)
    try:
        proc, rep = launch_to_end(work, PY, "src/train.py", watch=40, log=None, check=True, env=job_env())
        (smoke,) = [c for c in rep["checks"] if c["id"] == "imports.smoke"]
        assert smoke["status"] == "ok", smoke
        problems = [c for c in rep["checks"] if c["phase"] == "pre" and c["status"] in ("fail", "error", "timeout")
                    and not c.get("silenced")]
        assert not problems, problems  # what `check` would exit 1 for (engine.exit_code)
        assert rep["verdict"]["state"] == "ok", rep["verdict"]
    finally:
        kill_runs(work)


def test_a_project_module_put_on_sys_path_by_its_own_helper_never_blocks_the_launch(tmp_path):
    """tools/train.py does `sys.path.insert(0, _root())` with a helper of its own (which the probe does not run),
    then imports the project's package: not importable in the probe, importable in the job. A warning, no block.
    Read in the launch's own pre-launch checks (`check`'s), not in a `dfdoctor check` run before it."""
    work = tmp_path / "proj"
    (work / "pkg").mkdir(parents=True)
    (work / "tools").mkdir()
    (work / "pkg" / "__init__.py").write_text("")
    (work / "pkg" / "mod.py").write_text("X = 1\n")
    (work / "tools" / "train.py").write_text(
        "import os\nimport sys\n\n\ndef _root():\n"
        "    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n\n\n"
        "sys.path.insert(0, _root())\nfrom pkg.mod import X  # noqa: E402\n\nprint('trained', X)\n")
    try:
        proc, rep = launch_to_end(work, PY, "tools/train.py", watch=20, log=None, check=True, env=job_env())
        (rec,) = [c for c in rep["checks"] if c["id"] == "imports.smoke"]
        assert rec["status"] == "warn" and rec.get("basis") == "static", rec
        assert "tools/train.py:9: sys.path.insert(0, _root())" in rec["summary"], rec
        problems = [c for c in rep["checks"] if c["phase"] == "pre" and c["status"] in ("fail", "error", "timeout")
                    and not c.get("silenced")]
        assert not problems, problems  # what `check` would exit 1 for (engine.exit_code)
        assert rep["verdict"]["state"] == "ok", rep["verdict"]
    finally:
        kill_runs(work)


SPAWN = (PY, "main.py", "--multiprocessing-distributed", "--rank", "0")  # imagenet's README line, one node


@pytest.mark.parametrize("argv,said,fix", [
    # two nodes asked for, the second never started: the store listens here, rank 0 waits for the other
    (("--dist-url", "tcp://127.0.0.1:{port}", "--world-size", "2"),
     ("rendezvous tcp://127.0.0.1:{port} (--dist-url)", "--world-size 2", "--rank 0", "listens on this machine"),
     ("--rank 1", "not 127.0.0.1", "--world-size 1")),
    # the project's own default --dist-url (an address nobody serves) never changed: the TCPStore client retries
    (("--world-size", "1"), ("tcp://224.66.41.62:23456", "its default, main.py:15", "failed to connect"),
     ("Give --dist-url the address of the node that runs rank 0", "--dist-url tcp://127.0.0.1:23456")),
], ids=["second-node-never-started", "default-dist-url-unreachable"])
def test_a_spawned_rendezvous_that_never_completes_is_named_with_its_options(argv, said, fix, tmp_path):
    """pytorch/examples' imagenet style: mp.spawn, then init_process_group(init_method=args.dist_url, ...), no
    torchrun (so no RANK in the environment). Was `running` (silent, or its log growing with TCPStore retries)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    work = _work(tmp_path, "spawn-dist-url")
    try:
        proc, rep = launch(work, *SPAWN, *[a.format(port=port) for a in argv], watch=30, log=None, env=job_env())
        v = rep["verdict"]
        text = "\n".join([v["summary"], *v["evidence"]])
        assert v["cause"] == causes.RANK_MISSING and v["state"] == "failed", (v["cause"], v["summary"])
        for s in said:
            assert s.format(port=port) in text, (s, text)
        for s in fix:
            assert s in v["fix"], (s, v["fix"])
    finally:
        kill_runs(work)


def _in_a_small_dev_shm(*argv: str) -> list[str]:
    """argv run in a mount namespace of its own whose /dev/shm is a full 64 KiB tmpfs: what a container started
    without --shm-size looks like once its 64 MB are taken (the machine's own /dev/shm is left alone)."""
    fill = "dd if=/dev/zero of=/dev/shm/fill bs=4k count=64 2>/dev/null"
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            f'mount -t tmpfs -o size=64k tmpfs /dev/shm && {{ {fill}; true; }} && exec "$@"', "sh", *argv]


def test_a_full_dev_shm_met_by_a_semaphore_is_shm_exhausted_with_the_workers_option(tmp_path):
    """DataLoader(num_workers=args.workers) creates its queues' semaphores (SemLock, a file in /dev/shm): with
    /dev/shm full that fails with `OSError: [Errno 28] No space left on device` naming no path, which was read as
    disk-full with a checkpoint-cleanup fix."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.skip("needs root to mount a small tmpfs over /dev/shm in a mount namespace")
    from jobs.harness import DFDOCTOR

    work = _work(tmp_path, "shm-workers")
    out = work / "report.json"
    try:
        proc = subprocess.run(_in_a_small_dev_shm(DFDOCTOR, "launch", "--cwd", str(work), "--watch", "40",
                                                  "--no-check", "--format", "json", "--output", str(out), "--",
                                                  PY, "train.py", "--epochs", "2"),
                              cwd=work, env=job_env(), capture_output=True, text=True, timeout=240)
        assert out.exists(), (proc.returncode, proc.stdout, proc.stderr)
        v = json.loads(out.read_text())["verdict"]
        said = "\n".join([v["summary"], *v["evidence"]])
        assert v["cause"] == causes.SHM_EXHAUSTED, (v["cause"], v["summary"], v["fix"])
        for text in ("multiprocessing semaphore (SemLock)", "train.py, line 24", "No space left on device"):
            assert text in said, (text, said)
        for text in ("--shm-size", "fewer DataLoader workers (--workers, default 4)"):
            assert text in v["fix"], (text, v["fix"])
    finally:
        kill_runs(work)


def test_a_validation_split_smaller_than_one_batch_is_named_as_an_empty_loader_not_buffering(tmp_path):
    """100 rows, --val-split 0.1 and --batch-size 16 with drop_last=True: the validation loader has no batch, and
    `cycle(val_dl)` loops over it forever, silent and busy, which was called output-buffered."""
    work = _work(tmp_path, "val-split")
    (work / "data").mkdir()
    shutil.copyfile(_made("val-split/train.pt"), work / "data" / "train.pt")
    try:
        proc, rep = launch(work, PY, "train.py", "--steps", "100", watch=60, log=None, env=job_env())
        v = rep["verdict"]
        said = "\n".join([v["summary"], *v["evidence"]])
        assert v["cause"] == causes.DATA_EMPTY and v["state"] == "failed", (v["cause"], v["summary"])
        for text in ("`for data in dl:`", "`val_dl`", "train.py:31", "--val-split 0.1, its default",
                     "--batch-size 16, its default"):
            assert text in said, (text, said)
        assert "drop_last=False" in v["fix"] and "--val-split 0.1" in v["fix"], v["fix"]
    finally:
        kill_runs(work)


def test_more_nodes_than_started_here_is_a_rendezvous_waiting_for_the_others_not_buffering(tmp_path):
    """`--trainer.num_nodes=2` on one machine: the world size counts a second node nobody starts, and the one process
    waits in init_process_group's env:// rendezvous (Lightning's DDP without a scheduler)."""
    work = _work(tmp_path, "lightning-nodes")
    try:
        proc, rep = launch(work, PY, "main.py", "--trainer.num_nodes=2", watch=40, log=None, env=job_env())
        v = rep["verdict"]
        said = "\n".join([v["summary"], *v["evidence"]])
        assert v["cause"] == causes.RANK_MISSING and v["state"] == "failed", (v["cause"], v["summary"])
        for text in ("for 1 more process(es)", "world size is 2 (--trainer.num_nodes=2)", "env:// rendezvous",
                     "MEMBER: 1/2"):
            assert text in said, (text, said)
        assert "--trainer.num_nodes=1" in v["fix"] and "NODE_RANK" in v["fix"], v["fix"]
    finally:
        kill_runs(work)


def _devices_read_at_run_time(work: Path) -> None:
    """main.py as trainers write it whose processes a node comes from the machine at run time (its CPUs, like
    Lightning's devices="auto"), with no device option and no MEMBER line printed: nothing says the world size."""
    src = (work / "main.py").read_text()
    src = src.replace('parser.add_argument("--trainer.devices", type=int, default=1)\n', "")
    src = src.replace("trainer.devices", "PER_NODE")
    src = src.replace("def setup_ddp(trainer):", "PER_NODE = max(2, len(os.sched_getaffinity(0)))\n\n\n"
                      "def setup_ddp(trainer):")
    src = src.replace('    print(f"Initializing distributed', '    # print(f"Initializing distributed')
    assert src.count("PER_NODE") == 3 and "--trainer.devices" not in src, src
    (work / "main.py").write_text(src)


def test_a_world_size_whose_processes_a_node_are_not_read_is_said_not_established_not_counted_as_one(tmp_path):
    """`--trainer.num_nodes=2` where the processes a node runs are the machine's (no device option, no MEMBER line):
    the second node is named missing, and the world size is said not established instead of 2 x 1."""
    work = _work(tmp_path, "lightning-nodes")
    _devices_read_at_run_time(work)
    try:
        proc, rep = launch(work, PY, "main.py", "--trainer.num_nodes=2", watch=40, log=None, env=job_env())
        v = rep["verdict"]
        said = "\n".join([v["summary"], *v["evidence"]])
        assert v["cause"] == causes.RANK_MISSING and v["state"] == "failed", (v["cause"], v["summary"])
        for text in ("1 more node(s)", "--trainer.num_nodes=2 asks for 2 nodes", "world size was not established",
                     "processes per node: not established"):
            assert text in said, (text, said)
        assert "1 more process(es)" not in said and "world size is 2" not in said, said
        assert "--trainer.num_nodes=1" in v["fix"] and "NODE_RANK" in v["fix"], v["fix"]
    finally:
        kill_runs(work)


def test_a_download_at_import_is_named_by_check_as_a_download_with_its_url_not_an_import_error(tmp_path):
    """build-nanogpt's hellaswag.py loads its tokenizer at import (tiktoken fetches it with requests): imports.smoke
    sees the import fail here, offline, and names it download-failed with the URL urllib3's message gives, not
    import-error with "read the traceback". Only imports.smoke runs: the others (cuda.init's and cuda.nccl's probes,
    deps.requirements') said nothing this test reads."""
    work = _work(tmp_path, "encoding-at-import")
    proc = dfdoctor("check", "--cwd", str(work), "--only", "imports.smoke", "--format", "json", "--", PY,
                    "train_gpt2.py", cwd=work)
    rep = json.loads(proc.stdout)
    (smoke,) = [c for c in rep["checks"] if c["id"] == "imports.smoke"]
    assert smoke["status"] == "fail" and smoke["cause"] == causes.DOWNLOAD_FAILED, (smoke["cause"], smoke["summary"])
    assert "Fetch https://bpe-files.invalid/gpt-2/encodings/main/vocab.bpe where there is network" in smoke["fix"], \
        smoke["fix"]
    assert "huggingface" not in smoke["fix"], smoke["fix"]
    # the project's own line that downloads, deep under thirty lines of requests' frames, is named (the probe kept
    # the traceback's tail only: "a download failed at requests/adapters.py, line 729")
    assert "bpe.py, line 14 (`resp = requests.get(blobpath, timeout=30)`)" in smoke["summary"], smoke["summary"]
    assert "at bpe.py:14" in smoke["fix"] and "adapters.py" not in smoke["summary"], smoke
    assert 'hellaswag.py", line 4, in <module>' in smoke["details"], smoke["details"]
