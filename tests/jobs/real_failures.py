"""Real failures of real torch on a CPU: each scenario makes the mistake a training job makes, and the traceback it
raises is printed as JSON ({name: traceback}) for tests/test_known_failures.py to diagnose. One process, so torch
is imported once. Usage: real_failures.py WORKDIR [NAME ...]"""

import argparse
import json
import logging
import os
import socket
import sys
import traceback

from store_port import free_port

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

WORK = sys.argv[1]


def torch_not_compiled_with_cuda():
    model = nn.Linear(2, 2)
    model.to("cuda")


def no_accelerator():
    nn.Linear(2, 2).to(0)  # PyTorch's DDP tutorial: model.to(gpu_id)


def cuda_call_on_cpu_build():
    torch.cuda.set_device("cuda:0")


def nccl_not_built():
    os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    try:
        dist.init_process_group(backend="nccl")
    finally:
        for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            os.environ.pop(k, None)


def env_var_expected():
    dist.init_process_group(backend="gloo")


def rank_keyerror():
    local_rank = int(os.environ["LOCAL_RANK"])
    return local_rank


def process_group_not_initialized():
    return dist.get_world_size()


def port_in_use():
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        dist.TCPStore("127.0.0.1", port, 1, True, timeout=__import__("datetime").timedelta(seconds=5))
    finally:
        busy.close()


def weights_only_refused():
    path = os.path.join(WORK, "args.pt")
    torch.save({"args": argparse.Namespace(lr=0.1), "model": {}}, path)
    torch.load(path)


def state_dict_size_mismatch():
    nn.Linear(4, 2).load_state_dict(nn.Linear(8, 2).state_dict())


def state_dict_keys():
    sd = {"module." + k: v for k, v in nn.Linear(4, 2).state_dict().items()}
    nn.Linear(4, 2).load_state_dict(sd)


def checkpoint_truncated():
    path = os.path.join(WORK, "cut.pt")
    torch.save({"w": torch.zeros(1000)}, path)
    with open(path, "r+b") as f:
        f.truncate(200)
    torch.load(path, map_location="cpu")


def invalid_load_key():
    path = os.path.join(WORK, "yolov5s.pt")
    with open(path, "w") as f:  # what `git clone` leaves without git-lfs
        f.write("version https://git-lfs.github.com/spec/v1\noid sha256:4b3f\nsize 14808437\n")
    torch.load(path, weights_only=False)


def cuda_home_missing():
    from torch.utils.cpp_extension import CUDAExtension
    return CUDAExtension("fused", ["fused.cu"])


def cannot_import_name():
    from torch.nn import FlashTransformerLayer  # noqa: F401 - a name another torch release has


class _DyingDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        os._exit(1)  # a worker that dies without a word (what the OOM killer leaves)


def worker_exited():
    for _ in torch.utils.data.DataLoader(_DyingDataset(), num_workers=1):
        pass


def save_folder_missing():
    torch.save({"w": torch.zeros(1)}, os.path.join(WORK, "out-run7", "ckpt.pt"))


def numpy_removed_alias():
    return np.array([1, 2], dtype=np.float)


def matmul_shapes():
    nn.Linear(128, 10)(torch.zeros(64, 9216))


def batch_size_mismatch():
    F.cross_entropy(torch.zeros(128, 10), torch.zeros(64, dtype=torch.long))


def dtype_mismatch():
    nn.Linear(4, 2)(torch.zeros(3, 4, dtype=torch.float64))


def inplace_modified():
    w = torch.ones(3, requires_grad=True)
    y = torch.sigmoid(w)
    y.add_(1)
    y.sum().backward()


def backward_twice():
    w = torch.ones(3, requires_grad=True)
    loss = (w.exp() * 2).sum()
    loss.backward()
    loss.backward()


def no_grad_fn():
    with torch.no_grad():
        loss = nn.Linear(2, 1)(torch.zeros(1, 2)).sum()
    loss.backward()


def target_out_of_bounds():
    F.nll_loss(torch.zeros(4, 10), torch.tensor([1, 2, 3, 10]))


def embedding_index():
    nn.Embedding(65, 8)(torch.tensor([[1, 70]]))


def worker_pickle():
    data = torch.utils.data.TensorDataset(torch.zeros(4, 1))
    loader = torch.utils.data.DataLoader(data, num_workers=1, collate_fn=lambda b: b,
                                         multiprocessing_context="spawn")
    for _ in loader:
        pass


def log_folder_missing():
    os.chdir(WORK)
    logging.basicConfig(filename="outputs/run7/train.log", level=logging.INFO, force=True)


def input_file_missing():
    os.chdir(WORK)
    return np.memmap(os.path.join("data", "shakespeare_char", "train.bin"), dtype=np.uint16, mode="r")


def main():
    names = sys.argv[2:] or [n for n, f in globals().items() if callable(f) and not n.startswith("_")
                             and f.__module__ == "__main__" and n != "main"]
    out = {}
    for name in names:
        try:
            globals()[name]()
        except BaseException:  # noqa: B902 - every failure is the sample
            out[name.replace("_", "-")] = traceback.format_exc()
        else:
            out[name.replace("_", "-")] = None
    print(json.dumps(out))


if __name__ == "__main__":
    main()
