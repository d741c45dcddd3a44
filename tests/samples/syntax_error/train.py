import os


def train(cfg:
    return cfg
