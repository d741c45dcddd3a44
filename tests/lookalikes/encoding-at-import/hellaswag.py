"""An evaluation helper in the manner of build-nanogpt's hellaswag.py: it loads its tokenizer at import time."""
from bpe import get_encoding

enc = get_encoding("gpt2")


def render_example(example):
    return [len(example)]
