import os

import torch


class TinyData:
    """Batches of (features, label) read from data_dir/train.pt."""

    def __init__(self, data_dir: str, batch_size: int):
        path = os.path.join(data_dir, "train.pt")
        blob = torch.load(path)
        self.x, self.y, self.batch_size = blob["x"], blob["y"], batch_size

    def __iter__(self):
        for i in range(0, len(self.x), self.batch_size):
            yield self.x[i:i + self.batch_size], self.y[i:i + self.batch_size]
