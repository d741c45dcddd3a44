"""A DataLoader with worker processes whose batches (8 MiB each) pass through /dev/shm: in a container started
with a small --shm-size (docker's default is 64 MiB) the workers die handing batches over (`shm-exhausted`)."""
import torch
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.full((2, 1024, 1024), float(i))  # 8 MiB of float32


if __name__ == "__main__":
    print("training", flush=True)
    for step, batch in enumerate(DataLoader(Images(), batch_size=4, num_workers=2)):
        print(f"step {step} mean {batch.mean().item():.1f}", flush=True)
