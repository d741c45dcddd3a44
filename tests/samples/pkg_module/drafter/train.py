"""Run as `python -m drafter.train`."""
from .layers import Block

if __name__ == "__main__":
    print(Block)
