"""Fetches a BPE file the way tiktoken does on first use: requests.get, no timeout of its own."""


def read_file(url):
    import requests

    reply = requests.get(url)
    reply.raise_for_status()
    return reply.content


def bpe_ranks(url):
    return {token: int(rank) for token, rank in (line.split() for line in read_file(url).splitlines() if line)}
