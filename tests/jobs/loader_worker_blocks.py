"""A DataLoader whose one worker blocks on one sample: the loop waits for a batch forever: `dataloader-stuck`,
naming the worker and the Dataset's line."""
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 100

    def __getitem__(self, i):
        if i == 8:
            time.sleep(600)  # a read that never returns
        return torch.tensor([i])


if __name__ == "__main__":
    for step, batch in enumerate(DataLoader(Slow(), batch_size=2, num_workers=1)):
        print(f"step {step}", flush=True)
