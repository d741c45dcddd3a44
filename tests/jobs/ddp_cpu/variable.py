"""The backend through a function's default parameter."""
import torch
import torch.distributed as dist


def setup(backend="gloo"):
    dist.init_process_group(backend=backend)


if __name__ == "__main__":
    setup()
    t = torch.ones(1)
    dist.all_reduce(t)
    print(f"rank {dist.get_rank()}: all-reduced {t.item():g}", flush=True)
    dist.destroy_process_group()
