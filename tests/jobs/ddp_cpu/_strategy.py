"""A framework's strategy (Lightning's DDPStrategy picks its backend by the accelerator the same way)."""
import torch
import torch.distributed as dist


def setup_environment(accelerator: str) -> None:
    dist.init_process_group("nccl" if accelerator == "gpu" else "gloo")
