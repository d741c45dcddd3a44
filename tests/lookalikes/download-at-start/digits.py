"""A data set class in torchvision.datasets' manner (MNIST(root, train=True, download=False)): it looks for its
processed files under root, downloads and unpacks them from its mirrors when download=True and they are missing,
and refuses with "Dataset not found. You can use download=True to download it" otherwise."""
import os
import urllib.request

import torch
from torch.utils.data import Dataset


class TinyDigits(Dataset):
    mirrors = ["https://tiny-digits.invalid/"]
    resources = ["tiny-digits.pt"]

    def __init__(self, root, train=True, download=False):
        self.root = root
        if download:
            self.download()
        if not self._check_exists():
            raise RuntimeError("Dataset not found. You can use download=True to download it")
        data = torch.load(os.path.join(self.folder, self.resources[0]))
        self.x, self.y = (data["x_train"], data["y_train"]) if train else (data["x_test"], data["y_test"])

    @property
    def folder(self):
        return os.path.join(self.root, type(self).__name__, "raw")

    def _check_exists(self):
        return all(os.path.isfile(os.path.join(self.folder, name)) for name in self.resources)

    def download(self):
        if self._check_exists():
            return
        os.makedirs(self.folder, exist_ok=True)
        for name in self.resources:
            for mirror in self.mirrors:
                url = f"{mirror}{name}"
                print(f"Downloading {url}", flush=True)
                urllib.request.urlretrieve(url, os.path.join(self.folder, name))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]
