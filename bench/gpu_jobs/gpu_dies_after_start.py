"""A GPU job whose start-up looks busy and then dies before training, about 6 s in: CUDA up, a model built and
its layer table printed at once, four shards 'loaded' a second apart, then the data file is not found. A
launch must never call it running (nanoGPT with its data not prepared, issue 26, on a GPU)."""
import time

import torch

layers = [torch.nn.Linear(1024, 1024).cuda() for _ in range(24)]
for i, layer in enumerate(layers):
    print(f"layers.{i}.weight {list(layer.weight.shape)}", flush=True)
for shard in range(1, 5):
    time.sleep(1.0)
    print(f"Loading checkpoint shard {shard}/4", flush=True)
time.sleep(1.0)
open("data/train.bin", "rb")
