"""Encoding names to the URL of their BPE file (the stand-in's one encoding)."""
from tiktoken import load

URLS = {"gpt2": "https://openaipublic.dfdoctor.invalid/gpt-2/encodings/main/vocab.bpe"}


def get_encoding(name):
    return load.bpe_ranks(URLS[name])
