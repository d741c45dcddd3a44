"""The cache of a library that downloads its own files at run time, named in a download's fix where the frames
that download are that library's: its variable does for it what HF_HUB_OFFLINE and a local cache do for the
Hugging Face hub, which it never reads.

tiktoken (`tiktoken.get_encoding("gpt2")`) fetches its BPE files over HTTPS with requests on first use and keeps
each in its cache folder, named by the SHA-1 of its URL: the folder TIKTOKEN_CACHE_DIR names (DATA_GYM_CACHE_DIR
read next), else `data-gym-cache` in the temp folder (tempfile.gettempdir(): $TMPDIR, else /tmp), as
tiktoken/load.py's read_file_cached reads it (0.14.0). A file found there is never downloaded again; an empty
value turns the cache off (every use downloads). The record keeps both variables of the job's environment
(agent/record.py), so a verdict says which folder the job had (`for_the_job`).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

from dfdoctor.lazy_re import compile_later

_TIKTOKEN = compile_later(r"(^|/)tiktoken(_ext)?/")  # tiktoken/load.py, tiktoken_ext/openai_public.py

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


_CACHE_VARS = ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")  # the order tiktoken reads them in


def for_the_job(fix: str, env: Mapping[str, str]) -> tuple[str, list[str]]:
    """(the fix, evidence lines) with tiktoken's cache said as the job's environment (its record) has it: the
    folder it named, an empty value that turns the cache off, or none (the default folder). A fix that is not
    tiktoken's is given back as it is."""
    if TIKTOKEN_FIX not in fix:
        return fix, []
    name = next((n for n in _CACHE_VARS if n in env), None)
    if name is None:
        tmp = env.get("TMPDIR")
        where = f"data-gym-cache in its temp folder ({f'TMPDIR={tmp}' if tmp else '/tmp, where TEMP or TMP name none'})"
        return fix, [f"no TIKTOKEN_CACHE_DIR in the job's recorded environment (nor DATA_GYM_CACHE_DIR): tiktoken's cache "
                     f"is {where}"]
    folder = env[name]
    said = [f"{name}={folder!r} in the job's environment"]
    if not folder:
        told = (f"The job has {name} set empty, which turns tiktoken's cache off: it downloads its BPE files on "
                "every use. Run the same `tiktoken.get_encoding(...)` once where there is network with "
                f"{name} set to a folder, copy that folder to this machine and set {name} to it in the job's "
                "environment (not tried); or point HTTPS_PROXY at a proxy reachable from here.")
    else:
        told = (f"The job has {name}={folder}, and tiktoken did not find the file there (it downloads only then): "
                f"run the same `tiktoken.get_encoding(...)` once where there is network with {name} set to a "
                f"folder, and copy what it writes into {folder} on this machine (not tried); or point HTTPS_PROXY "
                "at a proxy reachable from here.")
    return fix.replace(TIKTOKEN_FIX, told), said
