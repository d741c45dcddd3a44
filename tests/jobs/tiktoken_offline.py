"""Loads its tokenizer at start, as llm.c's and nanoGPT's data scripts do: tiktoken fetches the BPE file on first
use, which a machine without network never gets (a hang behind a proxy that never answers, or a failure)."""
import tiktoken

print("loading the tokenizer", flush=True)
enc = tiktoken.get_encoding("gpt2")
print("tokens", len(enc), flush=True)
