"""An embedding lookup with a token id past the vocabulary, on the GPU: a device-side assert (`cuda-error`)."""
import torch

emb = torch.nn.Embedding(1000, 64).cuda()
print("step 0", flush=True)
ids = torch.tensor([1, 2, 1000], device="cuda")  # 1000 is one past the vocabulary
out = emb(ids).sum()
print(out.item(), flush=True)
