"""The HTML page's templates, compiled ahead of time.

`make test` keeps Jinja2's compiled code of each template in templates/__pycache__ (`html.keep_compiled`), as
compileall keeps Python's; every launch and status that saves a report then reads it instead of compiling the
templates again (0.05 of its CPU-seconds, issue 45). At run time the folder is only read. Jinja2 takes a file only
for the same template source and Python version, and the file's name carries the environment's options, which
shape the compiled code too: with no file, or a file of other sources or options, the page compiles as before.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import jinja2


class KeptCode(jinja2.BytecodeCache):
    """Compiled templates in `folder`, one file per template and set of options; written only when `write`."""

    def __init__(self, folder: Path, options: str, write: bool = False) -> None:
        self.folder, self.options, self.write = folder, options, write

    def _path(self, bucket: jinja2.bccache.Bucket) -> Path:
        return self.folder / f"{bucket.key}-{self.options}.jinja"

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            with open(self._path(bucket), "rb") as f:
                bucket.load_bytecode(f)  # Jinja2 resets it for another source or Python
        except Exception:  # none kept, unreadable or torn: the template compiles as before
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if not self.write:
            return
        self.folder.mkdir(exist_ok=True)
        path = self._path(bucket)
        part = path.with_name(f"{path.name}.{os.getpid()}.part")
        with open(part, "wb") as f:
            bucket.write_bytecode(f)
        os.replace(part, path)  # a reader sees the whole file or none


def options_key(env: jinja2.Environment) -> str:
    """A digest of what, besides a template's source and the Python version, shapes its compiled code."""
    finalize = env.finalize
    words = (jinja2.__version__, env.autoescape, env.trim_blocks, env.lstrip_blocks, env.keep_trailing_newline,
             env.newline_sequence, env.block_start_string, env.block_end_string, env.variable_start_string,
             env.variable_end_string, env.comment_start_string, env.comment_end_string, env.line_statement_prefix,
             env.line_comment_prefix, env.optimized, env.is_async, sorted(env.extensions),
             finalize is not None, getattr(finalize, "jinja_pass_arg", None))
    return hashlib.sha256(repr(words).encode()).hexdigest()[:16]
