"""A stand-in for tiktoken, put on PYTHONPATH by tests/test_tiktoken_cache.py: the suite's venv must not have the
real one (tests/test_corpus.py's llm.c case needs `import tiktoken` to fail). It has tiktoken's package, module
and function names and its way of fetching a BPE file on first use (requests.get of the file's URL, from
tiktoken/load.py's read_file), nothing else; its host is under .invalid, which never resolves. On this machine
the real tiktoken 0.14.0, run the same way, gave the same verdicts (docs/interface.md, round 16)."""
from tiktoken.registry import get_encoding  # noqa: F401
