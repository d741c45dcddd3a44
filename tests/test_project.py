"""The model of the user's project (doctor/project): its parser's options, its README's lines, how it installs, the
paths its code touches; and the fixes written with it (doctor/diagnose/user_terms.py), each on a small project
written here the way public projects write it."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from dfdoctor import project
from dfdoctor.diagnose import user_terms
from dfdoctor.diagnose.rules_runtime import Context
from dfdoctor.diagnose.traceback import parse_python_error


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def _error(file: Path, line: int, code: str, headline: str) -> object:
    return parse_python_error(f'Traceback (most recent call last):\n  File "{file}", line {line}, in <module>\n'
                              f"    {code}\n{headline}\n")


def test_argparse_options_with_short_flags_defaults_and_the_value_the_command_gives(tmp_path):
    _write(tmp_path, {"train.py": """
        import argparse
        p = argparse.ArgumentParser()
        p.add_argument('--input-file', '-i', type=str, default='names.txt')
        p.add_argument('--work-dir', '-o', default='out')
        p.add_argument('total_epochs', type=int)
        args = p.parse_args()
        """})
    proj = project.read(["python", "train.py", "5", "-i", "data/x.txt"], tmp_path)
    opt = proj.option("input_file")
    assert proj.options.kind == "argparse" and proj.options.complete
    assert opt.flags == ("--input-file", "-i") and opt.default == "names.txt" and opt.where == "train.py:4"
    assert proj.given(opt) == "data/x.txt" and proj.option("-o").dest == "work_dir"
    assert proj.option("device") is None and proj.options.exists("device") is False
    assert proj.option_for_path(str(tmp_path / "data/x.txt")) == opt
    assert proj.options.closest("--work_directory").flag == "--work-dir"
    assert opt.spelled("y.txt") == "--input-file y.txt"


def test_click_options_and_a_lightning_cli_whose_options_are_not_all_in_the_source(tmp_path):
    _write(tmp_path, {"cli.py": """
        import click
        @click.command()
        @click.option('--lr', default=0.1)
        @click.option('--data-dir', '-d', default='data')
        def main(lr, data_dir):
            pass
        """, "light.py": """
        from lightning.pytorch.cli import LightningCLI
        from lightning.pytorch import LightningModule
        class Net(LightningModule):
            def __init__(self, hidden: int = 64, lr=1e-3):
                super().__init__()
        LightningCLI(Net, datamodule_class=None)
        """})
    click_proj = project.read(["python", "cli.py"], tmp_path)
    assert click_proj.options.kind == "click" and click_proj.option("data_dir").flags == ("--data-dir", "-d")
    light = project.read(["python", "light.py"], tmp_path)
    assert light.options.kind == "lightning" and not light.options.complete
    assert light.option("trainer.accelerator").spelled("cpu") == "--trainer.accelerator=cpu"
    assert light.options.exists("backend") is None  # not known: never said to be absent
    assert light.option("model.hidden").default == 64 and light.option("model.lr").where == "light.py:5"


def test_a_configurator_takes_the_globals_set_before_its_exec_and_none_after(tmp_path):
    _write(tmp_path, {"configurator.py": "", "train.py": """
        out_dir = 'out'
        device = 'cuda'
        backend = 'nccl'
        exec(open('configurator.py').read())
        later = 1
        """})
    proj = project.read(["python", "train.py"], tmp_path)
    assert proj.options.kind == "configurator"
    assert proj.option("device").spelled("cpu") == "--device=cpu" and proj.option("later") is None


def test_readme_run_and_install_lines_and_the_projects_own_package(tmp_path):
    _write(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='x', packages=['mypkg'])\n",
                      "mypkg/__init__.py": "", "README.md": """
        Install:
        ```
        $ pip install -e .
        ```
        ```bash
        CUDA_VISIBLE_DEVICES=0 python scripts/run.py --epochs 6   # train
        torchrun --nproc_per_node=2 scripts/run.py
        ```
        Not a command: python is great.
        """, "scripts/run.py": "import mypkg\n", "scripts/requirements.txt": "numpy==2.0  # pinned\n"})
    proj = project.read(["python", "run.py"], tmp_path / "scripts")
    assert proj.root == tmp_path and proj.install.packaging == "setup.py" and proj.install.packages == ("mypkg",)
    assert [r.text for r in proj.runs()] == ["CUDA_VISIBLE_DEVICES=0 python scripts/run.py --epochs 6",
                                             "torchrun --nproc_per_node=2 scripts/run.py"]
    assert [r.where for r in proj.install.readme] == ["README.md:4"]
    assert proj.install.provider("mypkg.sub")[0] == "-e"
    assert proj.install.provider("numpy") == ("numpy==2.0", "scripts/requirements.txt:1 names it")
    assert proj.install.provider("cv2")[0] == "opencv-python"
    assert proj.install.provider("mystery")[0] is None
    assert "pip install -e ." in proj.install.own_line("/v/bin/python") and "README.md:4" in \
        proj.install.own_line("/v/bin/python")


def test_the_paths_the_code_reads_writes_and_deletes_with_the_option_that_sets_each(tmp_path):
    _write(tmp_path, {"train.py": """
        import argparse, os, torch
        p = argparse.ArgumentParser()
        p.add_argument('--save', default='model.pt')
        p.add_argument('--data', default='./data')
        args = p.parse_args()
        x = torch.load(os.path.join(args.data, 'train.pt'))
        with open(args.save, 'wb') as f:
            torch.save(x, f)
        os.remove('stale.lock')
        """})
    proj = project.read(["python", "train.py"], tmp_path)
    uses = {(u.mode, u.hint, u.dest) for u in proj.paths}
    assert ("read", "train.pt", "data") in uses and ("write", None, "save") in uses
    assert ("delete", "stale.lock", None) in uses
    assert proj.option_for_path(str(tmp_path / "data" / "train.pt")).flag == "--data"


def test_the_nccl_fix_names_no_backend_option_the_script_does_not_have(tmp_path):
    _write(tmp_path, {"ddp.py": """
        import os, torch
        from torch.distributed import init_process_group
        def ddp_setup():
            init_process_group(backend="nccl")
        """})
    err = _error(tmp_path / "ddp.py", 5, 'init_process_group(backend="nccl")',
                 "RuntimeError: Distributed package doesn't have NCCL built in")
    ctx = Context(argv=["python", "ddp.py"], cwd=str(tmp_path), python="python")
    told = user_terms.nccl_backend(err, ctx, re.search("NCCL", "NCCL"))
    assert "--backend" not in told.fix and "backend='gloo'" in told.fix and "ddp.py, line 5" in told.fix, told.fix


def test_a_job_that_only_reads_and_deletes_a_file_is_never_named_as_its_maker(tmp_path):
    _write(tmp_path, {"train.py": """
        import os
        data = open('cache.bin', 'rb').read()
        os.remove('cache.bin')
        """, "notes.py": "print('cache.bin is made elsewhere')\n"})
    err = _error(tmp_path / "train.py", 3, "data = open('cache.bin', 'rb').read()",
                 "FileNotFoundError: [Errno 2] No such file or directory: 'cache.bin'")
    ctx = Context(argv=["python", "train.py"], cwd=str(tmp_path), python="python")
    told = user_terms.input_file(err, ctx, re.search(r"'([^']+)'", "'cache.bin'"))
    assert "Run `python" not in told.fix and "Create cache.bin" in told.fix, told.fix


def test_the_script_the_readme_runs_first_is_named_with_its_line(tmp_path):
    _write(tmp_path, {"README.md": "```\npython make_data.py\npython train.py\n```\n",
                      "make_data.py": "import torch\ntorch.save([1], open('traindata.pt', 'wb'))\n",
                      "train.py": "import torch\ndata = torch.load('traindata.pt')\n"})
    err = _error(tmp_path / "train.py", 2, "data = torch.load('traindata.pt')",
                 "FileNotFoundError: [Errno 2] No such file or directory: 'traindata.pt'")
    ctx = Context(argv=["python", "train.py"], cwd=str(tmp_path), python="python")
    told = user_terms.input_file(err, ctx, re.search(r"'([^']+)'", "'traindata.pt'"))
    assert "Run `python make_data.py` first" in told.fix and "README.md:2 runs it" in told.fix, told.fix


def test_a_missing_module_of_the_projects_own_package_installs_the_project_not_a_name(tmp_path):
    _write(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='minGPT', packages=['mingpt'])\n",
                      "mingpt/__init__.py": "", "README.md": "```\npip install -e .\n```\n",
                      "projects/chargpt/chargpt.py": "from mingpt.model import GPT\n"})
    ctx = Context(argv=["python", "chargpt.py"], cwd=str(tmp_path / "projects" / "chargpt"), python="/v/bin/python")
    fix = user_terms.module_fix("mingpt.model", ctx)
    assert f"cd {tmp_path} && /v/bin/python -m pip install -e ." in fix and "pip install mingpt" not in fix, fix
    unknown = user_terms.module_fix("somelib", ctx)
    assert "pip install somelib" not in unknown and "not known here" in unknown and "README.md:2" in unknown


def test_the_device_fix_uses_the_projects_own_override_in_its_own_spelling(tmp_path):
    _write(tmp_path, {"train.py": """
        import sys
        from trainer import Trainer
        def get_config():
            C = CN()
            C.trainer = Trainer.get_default_config()
            return C
        config = get_config()
        config.merge_from_args(sys.argv[1:])
        """, "trainer.py": """
        class Trainer:
            @staticmethod
            def get_default_config():
                C = CN()
                C.device = 'auto'
                C.max_iters = None
                return C
        """})
    err = _error(tmp_path / "trainer.py", 9, "self.model = self.model.to(self.device)",
                 "AssertionError: Torch not compiled with CUDA enabled")
    ctx = Context(argv=["python", "train.py", "--trainer.device=cuda"], cwd=str(tmp_path), python="python")
    told = user_terms.cuda_device(err, ctx, None)
    assert "replace --trainer.device=cuda with --trainer.device=cpu" in told.fix, told.fix


def test_the_option_a_mistyped_word_meant_is_named_with_where_it_is_declared(tmp_path):
    _write(tmp_path, {"main.py": "import argparse\np = argparse.ArgumentParser()\np.add_argument('--epochs')\n"})
    ctx = Context(argv=["python", "main.py", "--epocs", "6"], cwd=str(tmp_path), python="python")
    near = user_terms.option_near("--epocs", ctx)
    assert (near.flag, near.where) == ("--epochs", "main.py:3")
    assert user_terms.option_near("--zzzzzz", ctx) is None


def test_a_job_started_outside_the_readmes_folder_is_told_to_run_both_from_there(tmp_path):
    _write(tmp_path / "proj", {"README.md": "```\npython make_data.py\npython train.py\n```\n",
                               "make_data.py": "import torch\ntorch.save([1], open('traindata.pt', 'wb'))\n",
                               "train.py": "import torch\ndata = torch.load('traindata.pt')\n"})
    err = _error(tmp_path / "proj" / "train.py", 2, "data = torch.load('traindata.pt')",
                 "FileNotFoundError: [Errno 2] No such file or directory: 'traindata.pt'")
    ctx = Context(argv=["python", "proj/train.py"], cwd=str(tmp_path), python="python")
    told = user_terms.input_file(err, ctx, re.search(r"'([^']+)'", "'traindata.pt'"))
    assert f"cd {tmp_path / 'proj'} && python make_data.py" in told.fix and "launch it from" in told.fix, told.fix


def test_hostile_files_give_a_project_without_options_never_an_exception(tmp_path):
    _write(tmp_path, {"README.md": "```\n" + "python \"unclosed\n" * 3 + "```\n",
                      "setup.py": "setup(packages=[", "train.py": "x = " + "(" * 200000 + ")" * 200000 + "\n"})
    (tmp_path / "bin.py").write_bytes(bytes(range(256)) * 100)
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for script in ("train.py", "bin.py", "loop", "missing.py"):
        proj = project.read(["python", script, "--x=1"], tmp_path)
        assert proj.options.options == () and proj.option("x") is None


def test_a_gpu_switch_of_the_command_is_dropped_and_a_cpu_switch_added(tmp_path):
    _write(tmp_path, {"dcgan.py": """
        import argparse, torch
        p = argparse.ArgumentParser()
        p.add_argument('--cuda', action='store_true', help='enables cuda')
        p.add_argument('--dist-backend', default='nccl', type=str)
        opt = p.parse_args()
        device = torch.device("cuda:0" if opt.cuda else "cpu")
        """, "mnist.py": """
        import argparse
        p = argparse.ArgumentParser()
        p.add_argument('--no-accel', action='store_true')
        """})
    err = _error(tmp_path / "dcgan.py", 8, "netG = Generator(ngpu).to(device)",
                 "AssertionError: Torch not compiled with CUDA enabled")
    ctx = Context(argv=["python", "dcgan.py", "--cuda"], cwd=str(tmp_path), python="python")
    fix = user_terms.cuda_device(err, ctx, None).fix
    assert "drop --cuda from the command" in fix and "dcgan.py:4" in fix, fix
    nccl = user_terms.nccl_backend(err, ctx, None).fix
    assert "add --dist-backend gloo to the command" in nccl, nccl
    ctx = Context(argv=["python", "mnist.py"], cwd=str(tmp_path), python="python")
    err = _error(tmp_path / "mnist.py", 4, "model.to('cuda')", "AssertionError: Torch not compiled with CUDA enabled")
    assert "add --no-accel to the command" in user_terms.cuda_device(err, ctx, None).fix


def test_a_config_file_of_the_configurator_sets_the_option_that_is_part_of_a_missing_path(tmp_path):
    _write(tmp_path, {"configurator.py": "", "config/small.py": "dataset = 'tiny'\n", "train.py": """
        import os
        import numpy as np
        dataset = 'openwebtext'
        exec(open('configurator.py').read())
        data_dir = os.path.join('data', dataset)
        train = np.memmap(os.path.join(data_dir, 'train.bin'), dtype=np.uint16, mode='r')
        """})
    proj = project.read(["python", "train.py", "config/small.py"], tmp_path)
    assert proj.given(proj.option("dataset")) == "tiny"
    err = _error(tmp_path / "train.py", 7, "train = np.memmap(os.path.join(data_dir, 'train.bin'), dtype=np.uint16)",
                 "FileNotFoundError: [Errno 2] No such file or directory: 'data/tiny/train.bin'")
    ctx = Context(argv=["python", "train.py", "config/small.py"], cwd=str(tmp_path), python="python")
    told = user_terms.input_file(err, ctx, re.search(r"'([^']+)'", "'data/tiny/train.bin'"))
    assert "set --dataset to the one that is there (it is a part of this path, joined at train.py:7; the command " \
        "sets it to 'tiny'" in told.fix, told.fix


def test_a_refusal_whose_usage_lists_no_options_names_the_projects_closest_one(tmp_path):
    """click's usage says only `[OPTIONS]`: the closest valid option comes from the project model, with where it
    is declared (the usage alone gives nothing to compare with)."""
    from dfdoctor.diagnose.bad_arguments import refused

    _write(tmp_path, {"train.py": "import click\n@click.command()\n@click.option('--learning-rate', default=0.1)\n"
                                  "def main(learning_rate):\n    pass\n"})
    ctx = Context(argv=["python", "train.py", "--learnin-rate", "3"], cwd=str(tmp_path), python="python")
    text = "Usage: train.py [OPTIONS]\nTry 'train.py --help' for help.\n\nError: No such option: --learnin-rate\n"
    v = refused(text, ctx, "exit status 2")
    assert v.cause == "bad-arguments" and "--learnin-rate" in v.summary
    assert "write --learning-rate instead of --learnin-rate" in v.fix and "train.py:3" in v.fix, v.fix


def test_a_key_value_config_that_raises_on_an_argument_is_a_bad_argument(tmp_path):
    """nanoGPT's configurator raises (it does not exit 2) on a key it lacks, and on `--key value` written with a
    space: both are bad-arguments with the project's spelling, read from the message naming the argument."""
    from dfdoctor.diagnose.bad_arguments import config_refused

    _write(tmp_path, {"train.py": "max_iters = 100\nbatch_size = 12\nexec(open('configurator.py').read())\n"})
    for argv, message, want in [
        (["--max_iter=10"], "ValueError: Unknown config key: max_iter", "Write --max_iters=10 instead of --max_iter=10"),
        (["--max_iters", "10"], "AssertionError: expecting each override arg to be of form --arg=value, got --max_iters",
         "Write --max_iters=10 instead of --max_iters 10"),
    ]:
        err = parse_python_error(f'Traceback (most recent call last):\n  File "{tmp_path}/train.py", line 3, in '
                                 "<module>\n    exec(open('configurator.py').read())\n  File \"<string>\", line 47, "
                                 f"in <module>\n{message}\n")
        found = config_refused(err, Context(argv=["python", "train.py", *argv], cwd=str(tmp_path), python="python"))
        assert found is not None and found.cause == "bad-arguments", message
        assert want in found.fix and f"{tmp_path}/train.py, line 3" in found.summary, found
    err = _error(tmp_path / "train.py", 3, "x = 1", "ValueError: math domain error")
    assert config_refused(err, Context(argv=["python", "train.py", "--max_iters=1"], cwd=str(tmp_path))) is None


def test_an_asserted_path_is_followed_through_the_calls_the_traceback_shows(tmp_path):
    """word_language_model's `assert os.path.exists(path)` in `tokenize(self, path)`: the traceback's frames say
    which call passed `path` (`self.tokenize(os.path.join(path, 'valid.txt'))` in `Corpus(args.data)`), the
    source what each passed: the path and the option that set it, though the exception carries neither."""
    from dfdoctor.diagnose.rules_runtime import assert_path_missing

    _write(tmp_path, {"main.py": "import argparse, data\np = argparse.ArgumentParser()\n"
                                 "p.add_argument('--data', default='./data/wikitext-2')\nargs = p.parse_args()\n"
                                 "corpus = data.Corpus(args.data)\n",
                      "data.py": "import os\nclass Corpus:\n    def __init__(self, path):\n"
                                 "        self.train = self.tokenize(os.path.join(path, 'train.txt'))\n"
                                 "        self.valid = self.tokenize(os.path.join(path, 'valid.txt'))\n"
                                 "    def tokenize(self, path):\n        assert os.path.exists(path)\n"})
    text = (f'Traceback (most recent call last):\n  File "{tmp_path}/main.py", line 5, in <module>\n'
            "    corpus = data.Corpus(args.data)\n"
            f'  File "{tmp_path}/data.py", line 5, in __init__\n'
            "    self.valid = self.tokenize(os.path.join(path, 'valid.txt'))\n"
            f'  File "{tmp_path}/data.py", line 7, in tokenize\n    assert os.path.exists(path)\nAssertionError\n')
    ctx = Context(argv=["python", "main.py", "--data", "corpus"], cwd=str(tmp_path), python="python")
    found = assert_path_missing(parse_python_error(text), ctx)
    assert found.cause == "input-missing" and "corpus/valid.txt" in found.summary and "data.py, line 7" in found.summary
    assert "--data corpus names a path that does not exist" in found.fix, found.fix


def test_a_download_the_job_makes_itself_names_its_url_and_the_files_that_skip_it(tmp_path):
    """pytorch/examples' gat: `if os.path.isfile(...cora.content) ...: else: requests.get(cora_url)`, with requests
    installed by `pip install --target` (no site-packages in its path: its dist-info says it is a package). The
    verdict blames the job's line and says what to put where, not a Hugging Face cache."""
    from dfdoctor.diagnose.rules_runtime import download_failed

    _write(tmp_path, {"main.py": "import os, requests\nurl = 'https://data.example.org/cora.tgz'\npath = './cora'\n"
                                 "if os.path.isfile(os.path.join(path, 'cora.content')):\n    print('there')\n"
                                 "else:\n    with requests.get(url, stream=True) as f:\n        pass\n",
                      "site/requests/adapters.py": "", "site/requests-2.34.2.dist-info/METADATA": ""})
    text = (f'Traceback (most recent call last):\n  File "{tmp_path}/main.py", line 7, in <module>\n'
            "    with requests.get(url, stream=True) as f:\n"
            f'  File "{tmp_path}/site/requests/adapters.py", line 729, in send\n'
            "    raise ConnectionError(e, request=request)\n"
            "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='data.example.org', port=443): Max retries "
            "exceeded with url: /cora.tgz (Caused by NameResolutionError(\"Name or service not known\"))\n")
    found = download_failed(parse_python_error(text), Context(argv=["python", "main.py"], cwd=str(tmp_path)))
    assert found.cause == "download-failed" and f"{tmp_path}/main.py, line 7" in found.summary, found.summary
    assert "Fetch https://data.example.org/cora.tgz" in found.fix and "./cora/cora.content exist" in found.fix
    assert "main.py:4 then skips the download" in found.fix and "HF_" not in found.fix, found.fix


def test_a_refusal_names_where_the_parser_declares_its_options_and_a_device_request_it_lacks(tmp_path):
    """pytorch/examples' gat, as users break it: `--device cuda` for a script that picks its device itself (its
    own switch is --no-accel), and a value of the wrong type: the user's file and line, never only `main.py`."""
    from dfdoctor.diagnose.bad_arguments import refused

    _write(tmp_path, {"main.py": "import argparse\np = argparse.ArgumentParser()\n"
                                 "p.add_argument('--epochs', type=int, default=300)\n"
                                 "p.add_argument('--no-accel', action='store_true')\nargs = p.parse_args()\n"})
    usage = "usage: main.py [-h] [--epochs EPOCHS] [--no-accel]\n"
    ctx = Context(argv=["python", "main.py", "--device", "cuda"], cwd=str(tmp_path), python="python")
    v = refused(usage + "main.py: error: unrecognized arguments: --device cuda\n", ctx, "exit status 2")
    assert "its options are declared at main.py:3-4" in v.summary, v.summary
    assert "Drop --device cuda from the command" in v.fix and "--no-accel at main.py:4" in v.fix, v.fix
    ctx = Context(argv=["python", "main.py", "--epochs", "ten"], cwd=str(tmp_path), python="python")
    v = refused(usage + "main.py: error: argument --epochs: invalid int value: 'ten'\n", ctx, "exit status 2")
    assert "--epochs is declared at main.py:3" in v.summary, v.summary


def test_a_download_whose_files_are_beside_the_script_says_to_launch_from_there(tmp_path):
    from dfdoctor.diagnose.rules_runtime import download_failed

    _write(tmp_path, {"gat/main.py": "import os, requests\nif os.path.isfile('./cora/cora.content'):\n    pass\n"
                                     "else:\n    requests.get('https://data.example.org/cora.tgz')\n",
                      "gat/cora/cora.content": "1 0 a\n"})
    text = (f'Traceback (most recent call last):\n  File "{tmp_path}/gat/main.py", line 5, in <module>\n'
            "    requests.get('https://data.example.org/cora.tgz')\n"
            "requests.exceptions.ConnectionError: Max retries exceeded with url: /cora.tgz (Name or service not "
            "known)\n")
    found = download_failed(parse_python_error(text), Context(argv=["python", "gat/main.py"], cwd=str(tmp_path)))
    assert f"Launch it from {tmp_path}/gat" in found.fix and "./cora/cora.content are there" in found.fix, found.fix


def test_an_assert_naming_a_missing_data_folder_is_input_missing_with_the_readmes_steps(tmp_path):
    """llama2.c: `assert len(shard_filenames) > 0, f"No bin files found in {bin_dir}"`, and a README that runs
    `python tinystories.py download` and `... pretokenize` before `python train.py`."""
    from dfdoctor.diagnose.data_missing import assert_names_missing_data

    _write(tmp_path, {"train.py": "import tinystories\n", "tinystories.py": "x = 1\n", "setup.py": "",
                      "README.md": "```bash\npython tinystories.py download\npython tinystories.py pretokenize\n```\n"
                                   "Then train:\n```bash\npython train.py\n```\n"})
    text = (f'Traceback (most recent call last):\n  File "{tmp_path}/tinystories.py", line 205, in __iter__\n'
            '    assert len(shard_filenames)>0, f"No bin files found in {bin_dir}"\n'
            "AssertionError: No bin files found in data/TinyStories_all_data\n")
    found = assert_names_missing_data(parse_python_error(text), Context(argv=["python", "train.py"],
                                                                        cwd=str(tmp_path)))
    assert found.cause == "input-missing" and "tinystories.py, line 205" in found.summary, found
    assert "`python tinystories.py download` (README.md:2), then `python tinystories.py pretokenize` " \
           "(README.md:3)" in found.fix, found.fix
    (tmp_path / "data" / "TinyStories_all_data").mkdir(parents=True)
    (tmp_path / "data" / "TinyStories_all_data" / "data00.bin").write_text("x")
    err = parse_python_error(text.replace("No bin files found in", "Bad shape of"))
    assert assert_names_missing_data(err, Context(argv=["python", "train.py"], cwd=str(tmp_path))) is None


def test_an_input_beside_the_script_of_a_job_started_elsewhere_says_to_launch_from_there(tmp_path):
    """ng-video-lecture's gpt.py opens 'input.txt' from the folder it starts in; run as `python ng/gpt.py` from
    the folder above, the file is there beside the script: the fix is that folder, with the command as typed there."""
    _write(tmp_path, {"ng/gpt.py": "import torch\nwith open('input.txt') as f:\n    text = f.read()\n",
                      "ng/input.txt": "hello\n"})
    err = _error(tmp_path / "ng" / "gpt.py", 2, "with open('input.txt') as f:",
                 "FileNotFoundError: [Errno 2] No such file or directory: 'input.txt'")
    ctx = Context(argv=["python", "ng/gpt.py", "--x"], cwd=str(tmp_path), python="python")
    told = user_terms.input_file(err, ctx, re.search(r"'([^']+)'", "'input.txt'"))
    assert f"`cd {tmp_path}/ng && python gpt.py --x`" in told.fix and "did not try" in told.fix, told.fix
    (tmp_path / "ng" / "input.txt").unlink()  # nowhere: no folder to launch from
    told = user_terms.input_file(err, ctx, re.search(r"'([^']+)'", "'input.txt'"))
    assert "Launch it from" not in told.fix and "Create input.txt" in told.fix, told.fix


def test_a_script_without_a_device_option_names_every_cuda_call_to_change(tmp_path):
    """pytorch-made's run.py: `.cuda()` at three lines, no device option. Editing the line that failed alone fails
    at the next; the fix names them all and that the project runs as written only on a GPU."""
    _write(tmp_path, {"run.py": "import torch\ntorch.cuda.manual_seed_all(42)\nx = torch.zeros(2).cuda()\n"
                                "y = torch.ones(2).cuda()\nmodel = torch.nn.Linear(2, 2)\nmodel.cuda()\n"})
    err = _error(tmp_path / "run.py", 3, "x = torch.zeros(2).cuda()",
                 "AssertionError: Torch not compiled with CUDA enabled")
    fix = user_terms.cuda_device(err, Context(argv=["python", "run.py"], cwd=str(tmp_path), python="python"),
                                 None).fix
    assert "calls .cuda() at lines 3, 4, 6" in fix and "machine with a GPU" in fix and "did not try" in fix, fix
