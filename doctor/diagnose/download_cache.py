"""The cache of a library that downloads its own files at run time, named in a download's fix where the frames
that download are that library's: its variable does for it what HF_HUB_OFFLINE and a local cache do for the
Hugging Face hub, which it never reads.

tiktoken (`tiktoken.get_encoding("gpt2")`) fetches its BPE files over HTTPS with requests on first use and keeps
each in its cache folder, named by the SHA-1 of its URL: the folder TIKTOKEN_CACHE_DIR names (DATA_GYM_CACHE_DIR
read next), else `data-gym-cache` in the temp folder (tempfile.gettempdir(): $TMPDIR, else /tmp), as
tiktoken/load.py's read_file_cached reads it (0.14.0). A file found there is never downloaded again.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional

_TIKTOKEN = re.compile(r"(^|/)tiktoken(_ext)?/")  # tiktoken/load.py, tiktoken_ext/openai_public.py

TIKTOKEN_WHAT = "tiktoken fetches its BPE file"
TIKTOKEN_FIX = ("tiktoken downloads its BPE files on first use and reads them from its cache after that: the folder "
                "TIKTOKEN_CACHE_DIR names (by default data-gym-cache in the temp folder, $TMPDIR or /tmp). Run the "
                "same `tiktoken.get_encoding(...)` once where there is network with TIKTOKEN_CACHE_DIR set to a "
                "folder, copy that folder to this machine and set TIKTOKEN_CACHE_DIR to it in the job's environment "
                "(not tried); or point HTTPS_PROXY at a proxy reachable from here.")


def library_of(files: Iterable[str]) -> Optional[tuple[str, str]]:
    """(what it downloads, the fix) of the library whose own files are among `files` (a stack's or a traceback's
    frames), or None where none of them is such a library's."""
    if any(_TIKTOKEN.search(f.replace("\\", "/")) for f in files):
        return TIKTOKEN_WHAT, TIKTOKEN_FIX
    return None
