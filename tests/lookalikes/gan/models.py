"""A registry of generators, looked up by name as timm's create_model does."""
import torch.nn as nn

_REGISTRY = {}


def register(fn):
    _REGISTRY[fn.__name__] = fn
    return fn


@register
def dcgan(nz, size):
    return nn.Sequential(nn.Linear(nz, 64), nn.ReLU(), nn.Linear(64, size * size), nn.Tanh())


@register
def mlp(nz, size):
    return nn.Sequential(nn.Linear(nz, size * size), nn.Tanh())


def create_model(name, **kwargs):
    if name not in _REGISTRY:
        raise RuntimeError(f"Unknown model ({name})")
    return _REGISTRY[name](**kwargs)
