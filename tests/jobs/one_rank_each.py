"""Runs job scripts one after another in this one interpreter, each as the only rank of its group, with the
variables `torchrun --nproc_per_node=1` gives its rank (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT: a free
port each, so each job's group has a store of its own), and writes what each did as JSON: its exit status, its
output and its error (a traceback where it raised).

    python one_rank_each.py OUT.json '[["positional.py"], ["option.py", "--dist-backend", "gloo"]]'

For tests that ask whether a job runs here (its backend forms a group on this torch), not how torchrun runs it:
one import of torch for all the jobs, where a torchrun each cost an agent and a rank, two imports of torch
(about 4 CPU-s a job on a 2-core CI machine). Each job runs as `python SCRIPT` would: as __main__, its folder first
on sys.path, its own sys.argv; its group, if it left one, is destroyed before the next job starts, and the
exception hook init_process_group wraps (a "[rankN]: " prefix) is put back."""
import contextlib
import io
import json
import os
import runpy
import sys
import traceback

from store_port import free_port


def run_one(argv: list) -> dict:
    os.environ.update(RANK="0", LOCAL_RANK="0", GROUP_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1",
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    script = os.path.abspath(argv[0])
    sys.argv, sys.path[0] = list(argv), os.path.dirname(script)
    out, err, rc, hook = io.StringIO(), io.StringIO(), 0, sys.excepthook
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as e:  # as the interpreter ends on it: None is 0, a number is the status, else 1
            rc = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            rc = 1
        finally:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                dist.destroy_process_group()
            sys.excepthook = hook
    return {"argv": list(argv), "rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}


if __name__ == "__main__":
    out_path, commands = sys.argv[1], json.loads(sys.argv[2])
    results = [run_one(argv) for argv in commands]
    with open(out_path, "w") as f:
        json.dump(results, f)
