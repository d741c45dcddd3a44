import torch
class Net(torch.nn.Module):
    pass
