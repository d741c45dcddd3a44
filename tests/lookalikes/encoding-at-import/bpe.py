"""A byte-pair encoding loader in the manner of tiktoken's load.py: the encoding's files are fetched with requests
from their blob store on first use and kept in a cache folder (BPE_CACHE_DIR) named by the URL's hash."""
import hashlib
import os
import posixpath
import tempfile

import requests

BLOBS = "https://bpe-files.invalid/gpt-2/encodings/main"


def read_file(blobpath):
    resp = requests.get(blobpath, timeout=30)
    resp.raise_for_status()
    return resp.content


def read_file_cached(blobpath):
    cache_dir = os.environ.get("BPE_CACHE_DIR") or os.path.join(tempfile.gettempdir(), "bpe-cache")
    cache_path = os.path.join(cache_dir, hashlib.sha1(blobpath.encode()).hexdigest())
    if os.path.exists(cache_path):
        with open(cache_path, "rb") as f:
            return f.read()
    contents = read_file(blobpath)
    os.makedirs(cache_dir, exist_ok=True)
    with open(cache_path, "wb") as f:
        f.write(contents)
    return contents


def get_encoding(name):
    files = {}
    for part in ("vocab.bpe", "encoder.json"):
        files[part] = read_file_cached(posixpath.join(BLOBS, part))
    return files
