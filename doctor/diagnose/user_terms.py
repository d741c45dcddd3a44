"""Fixes in the project's own terms: which line set the device, which flag overrides it, which script creates a
missing file, which torchvision pairs with the installed torch.

Each refiner reads the job's own files (the frames of its traceback, its command, its working folder) and returns
what to say instead of the corpus row's generic words, or None when the row does not apply after all (a missing
log folder is not a missing input). Nothing here runs the job's code; a fix that was not tried says so.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Optional

from dfdoctor.diagnose import torch_pairs
from dfdoctor.diagnose.rules_runtime import Context
from dfdoctor.diagnose.traceback import PyError, is_library

NOT_TRIED = " (dfdoctor did not try this fix)"


@dataclass
class Told:
    """What a refiner says: a summary and a fix (empty: keep the row's), and evidence lines to add."""

    summary: str = ""
    fix: str = ""
    evidence: list[str] = field(default_factory=list)


# ---- the device ------------------------------------------------------------------------------------------
def cuda_device(err: PyError, ctx: Context, m: re.Match) -> Told:
    """Where the job set its device to CUDA, and how this project overrides it (`--device=cpu` through a
    configurator, an argparse option), else the line to edit."""
    script = _user_script(err, ctx)
    setting = _module_assignment(script, "device") if script else None
    others = [line for line in _cuda_assignments(script, "device") if not setting or line != setting[0]] \
        if script else []
    evidence = []
    where = ""
    if setting:
        also = "; also set to CUDA at " + ", ".join(f"{_short(script, ctx)}:{n}" for n in others) if others else ""
        where = f" (device set to {setting[1]!r} at {_short(script, ctx)}:{setting[0]}{also})"
        evidence.append(f"{_short(script, ctx)}:{setting[0]}: device = {setting[1]!r}")
    evidence += [f"{_short(script, ctx)}:{n}: device is set to a CUDA device there too" for n in others]
    summary = f"The job asked for a GPU at {err.blame}{where}, but this torch cannot use one."
    override = _override_flag(script, "device") if script else None
    given = _given(ctx.argv, "device")
    if given is not None:
        evidence.append(f"the command sets --device={given}")
    if override and given is None:
        fix = (f"Run on the CPU: add {override}cpu to the command (this project takes --name=value overrides of its settings), or "
               "install a CUDA build of torch on a machine with a GPU" + NOT_TRIED + ".")
    elif setting:
        fix = (f"Run on the CPU: set device = 'cpu' at {_short(script, ctx)}:{setting[0]}, or install a CUDA "
               "build of torch on a machine with a GPU" + NOT_TRIED + ".")
    else:
        fix = ("Run on the CPU (pick the device with torch.cuda.is_available(): "
               "device = 'cuda' if torch.cuda.is_available() else 'cpu'), or install a CUDA build of torch on a "
               "machine with a GPU" + NOT_TRIED + ".")
    if given is not None and given.startswith("cpu"):
        lines = ", ".join(f"{_short(script, ctx)}:{n}" for n in others)
        fix = (f"The command asks for --device={given}, but the job still asked for CUDA at {err.user_where}: "
               + (f"{lines} sets a CUDA device on the path it took (under torchrun, for example)" if others else
                  "the code on that path picks its own device")
               + "; make that line honour the device asked for, run without that path (a single process, no "
               "torchrun) on this CPU-only machine, or install a CUDA build of torch on a machine with a GPU"
               + NOT_TRIED + ".")
    return Told(summary, fix, evidence)


def nccl_backend(err: PyError, ctx: Context, m: re.Match) -> Told:
    """The backend the job asked for and how this project changes it (`--backend=gloo`)."""
    script = _user_script(err, ctx)
    setting = _module_assignment(script, "backend") if script else None
    override = _override_flag(script, "backend") if script else None
    evidence = [f"{_short(script, ctx)}:{setting[0]}: backend = {setting[1]!r}"] if setting else []
    how = f"add {override}gloo to the command" if override else (
        f"set backend = 'gloo' at {_short(script, ctx)}:{setting[0]}" if setting else
        "pass backend='gloo' to init_process_group")
    cuda = _cuda_assignments(script, "device") if script else []
    fix = (f"On CPUs use the gloo backend: {how}; for NCCL, install a CUDA build of torch on a Linux machine with "
           "GPUs" + NOT_TRIED + ".")
    if cuda:
        fix += (" This script also sets a CUDA device (" + ", ".join(f"{_short(script, ctx)}:{n}" for n in cuda)
                + "): with gloo on a machine without GPUs it fails there next unless that line picks the CPU.")
    return Told("", fix, evidence)


# ---- packages ------------------------------------------------------------------------------------------
def torch_pair(err: PyError, ctx: Context, m: re.Match) -> Told:
    """The torchvision (and torchaudio) paired with the torch this job's interpreter has, from torch's index."""
    versions = torch_pairs.installed(_python(ctx)) if ctx.local else {}  # a target's packages are not here
    torch_v = versions.get("torch")
    evidence = [f"installed in {_python(ctx)}: " + ", ".join(f"{k} {v}" for k, v in versions.items())] \
        if versions else ["the installed versions could not be read (the job ran elsewhere)"]
    if not torch_v:
        return Told("", "Install torch and torchvision as a pair, from one index (https://pytorch.org/get-started/"
                    "previous-versions/ lists the pairs).", evidence)
    line = torch_pairs.install_line(torch_v, [p for p in ("torchvision", "torchaudio") if p in versions] or
                                    ["torchvision"], _python(ctx))
    paired = torch_pairs.paired(torch_v, "torchvision")
    have = versions.get("torchvision")
    why = f"torchvision {have} is not the one built for torch {torch_v}" if have and paired and \
        not have.startswith(paired) else f"torchvision {have} was built for another torch build (CUDA vs CPU)"
    return Told("", f"{why}; install the pair from torch's own index: {line}" + NOT_TRIED + ".", evidence)


# ---- checkpoints ---------------------------------------------------------------------------------------
def map_location(err: PyError, ctx: Context, m: re.Match) -> Told:
    """The user's torch.load line, with map_location added."""
    code = err.user_code or ""
    fixed = _with_kwarg(code, "torch.load", "map_location='cpu'") if "torch.load" in code else None
    fix = (f"Load it onto the CPU at {err.user_where}: `{fixed}`" if fixed else
           f"Load it onto the CPU: torch.load(path, map_location='cpu') at {err.user_where}") + \
        " (or map_location=device)."
    return Told("", fix)


def weights_only(err: PyError, ctx: Context, m: re.Match) -> Told:
    """Name the global the unpickler refused, so the allowlist line can be written out."""
    name = re.search(r"Unsupported global: GLOBAL ([\w.]+)", err.text)
    allow = f"torch.serialization.add_safe_globals([{name.group(1)}])" if name else \
        "torch.serialization.add_safe_globals([...the class the message names...])"
    return Told("", f"If you trust the file, allow what it holds before the load at {err.user_where}: {allow}; or "
                "torch.load(path, weights_only=False) there (it runs code stored in the file); or re-save only "
                "tensors and state_dict()s.", [f"refused: {name.group(1)}"] if name else [])


def state_dict_prefix(err: PyError, ctx: Context, m: re.Match) -> Told:
    """Say which prefix differs when the keys show it."""
    for prefix in ("module.", "_orig_mod."):
        if f'"{prefix}' in err.text or f"'{prefix}" in err.text:
            return Told("", f"The checkpoint's keys carry the prefix `{prefix}` (saved from "
                        f"{'DDP/DataParallel' if prefix == 'module.' else 'a torch.compile-d model'}): strip it "
                        f"before load_state_dict at {err.user_where}: "
                        f"sd = {{k.removeprefix('{prefix}'): v for k, v in sd.items()}}.", [f"keys start with {prefix}"])
    return Told()


# ---- files ---------------------------------------------------------------------------------------------
def log_file(err: PyError, ctx: Context, m: re.Match) -> Optional[Told]:
    """A log the job opens itself (logging.FileHandler, basicConfig(filename=...)) in a missing folder; None when
    the missing file is not opened by logging."""
    if not any("/logging/" in f.replace("\\", "/") for f, _, _ in err.frames):
        return None
    path = m.group(1)
    full = _resolve(path, ctx)
    folder = os.path.dirname(full) or "."
    evidence = [f"{path} resolves to {full} against the job's folder {ctx.cwd}" if ctx.cwd and not
                os.path.isabs(path) else f"log file: {full}"]
    missing = _first_missing(folder)
    if missing:
        evidence.append(f"{missing} does not exist now")
    return Told(f"The job opens its own log {path} at {err.blame}, and its folder {folder} does not exist.",
                f"Create the folder before the job starts (mkdir -p {shlex.quote(folder)}), or make the code "
                f"create it before it opens the log: os.makedirs({os.path.dirname(path)!r}, exist_ok=True) "
                f"before {err.user_where}.", evidence)


def input_file(err: PyError, ctx: Context, m: re.Match) -> Optional[Told]:
    """A file the job reads: where it resolves against the job's cwd, and what in the repo creates it."""
    path = m.group(1)
    if _writes(err):
        return None  # opening for writing in a missing folder is not a missing input
    if any(f.replace("\\", "/").endswith("/subprocess.py") for f, _, _ in err.frames):
        return None  # a program the job runs (subprocess) is not a file it reads
    full = _resolve(path, ctx)
    evidence = [f"{path} resolves to {full} against the job's working folder {ctx.cwd}"
                if ctx.cwd and not os.path.isabs(path) else f"path: {full}"]
    missing = _first_missing(os.path.dirname(full))
    evidence.append(f"{missing} does not exist either" if missing else
                    f"its folder {os.path.dirname(full)} exists; the file does not" if not os.path.exists(full)
                    else f"{full} exists now (created since the job died?)")
    maker = _creator(full, ctx)
    fix = f"Create {path} before the job starts, or point the job at where it is."
    if maker:
        evidence.append(f"{_short(maker, ctx)} is beside it and writes {os.path.basename(path)}")
        fix = (f"Run `python {_short(maker, ctx)}` first (it writes {os.path.basename(path)}), then launch again"
               + NOT_TRIED + ".")
        if "urlopen" in _read(maker) or "requests.get" in _read(maker) or "http" in _read(maker):
            fix += " It downloads its input: run it where there is network, or copy the files it fetches beside it."
    summary = f"The job reads {path} at {err.blame}, and it does not exist (looked for at {full})."
    return Told(summary, fix, evidence)


def _writes(err: PyError) -> bool:
    """The failing call opens for writing: open(..., 'w'/'a'/'x') or a save in the user's line."""
    code = err.user_code or ""
    return bool(re.search(r"""open\([^)]*,\s*(?:mode\s*=\s*)?['"][wax]""", code) or
                re.search(r"\.(?:save|savez|to_csv|write_text|write_bytes|savefig)\(", code))


def _creator(full: str, ctx: Context) -> Optional[str]:
    """A script near the missing file (its folder or its parents up to the job's cwd) that writes its name."""
    name = os.path.basename(full)
    folder = os.path.dirname(full)
    stop = os.path.realpath(ctx.cwd) if ctx.cwd else None
    for _ in range(4):
        if os.path.isdir(folder):
            for entry in sorted(os.listdir(folder)):
                if entry.endswith(".py"):
                    cand = os.path.join(folder, entry)
                    if name in _read(cand) or os.path.splitext(name)[0] in _read(cand) and "prepare" in entry:
                        return cand
        if stop and os.path.realpath(folder) == stop or os.path.dirname(folder) == folder:
            break
        folder = os.path.dirname(folder)
    return None


# ---- reading the job's own files ---------------------------------------------------------------------------
def _user_script(err: PyError, ctx: Context) -> Optional[str]:
    """The outermost frame in the job's own files (its main script), else the script its command names."""
    for f, _, _ in err.frames:
        if not f.startswith("<") and not is_library(f):
            return _resolve(f, ctx)
    for a in ctx.argv:
        if a.endswith(".py"):
            return _resolve(a, ctx)
    return None


def _module_assignment(script: str, name: str) -> Optional[tuple[int, object]]:
    """(line, value) of the first module-level `name = <constant>` in the script."""
    try:
        tree = ast.parse(_read(script))
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == name and isinstance(node.value, ast.Constant):
            return node.lineno, node.value.value
    return None


def _cuda_assignments(script: str, name: str) -> list[int]:
    """Lines anywhere in the script that set `name` to a CUDA device ('cuda', f'cuda:{local_rank}')."""
    try:
        tree = ast.parse(_read(script))
    except (SyntaxError, ValueError):
        return []
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            v = node.value
            text = v.value if isinstance(v, ast.Constant) else (
                v.values[0].value if isinstance(v, ast.JoinedStr) and v.values and
                isinstance(v.values[0], ast.Constant) else None)
            if isinstance(text, str) and text.startswith("cuda"):
                lines.append(node.lineno)
    return sorted(lines)


def _override_flag(script: str, name: str) -> Optional[str]:
    """`--name=` when the script takes command-line overrides of its globals (nanoGPT's configurator.py) or
    declares the option with argparse."""
    text = _read(script)
    if re.search(r"""add_argument\(\s*['"]--%s['"]""" % re.escape(name), text):
        return f"--{name} "
    if "configurator.py" in text and os.path.isfile(os.path.join(os.path.dirname(script), "configurator.py")):
        return f"--{name}="
    return None


def _given(argv: list[str], name: str) -> Optional[str]:
    """The value of --name in the command, if given."""
    for i, a in enumerate(argv):
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
        if a == f"--{name}" and i + 1 < len(argv):
            return argv[i + 1]
    return None


def _python(ctx: Context) -> str:
    """The training interpreter: as the launch named it, else from the job's command."""
    if ctx.python:
        return ctx.python
    if ctx.argv and os.path.basename(ctx.argv[0]).startswith("python"):
        return ctx.argv[0]
    return "python3"


def _resolve(path: str, ctx: Context) -> str:
    """`path` as the job saw it: relative paths against its working folder."""
    if os.path.isabs(path) or not ctx.cwd:
        return os.path.normpath(path)
    return os.path.normpath(os.path.join(ctx.cwd, path))


def _first_missing(folder: str) -> Optional[str]:
    """The outermost folder of `folder` that does not exist."""
    missing = None
    p = folder
    while p and not os.path.exists(p) and os.path.dirname(p) != p:
        missing = p
        p = os.path.dirname(p)
    return missing


def _short(path: Optional[str], ctx: Context) -> str:
    """A path relative to the job's folder when it is inside it."""
    if not path:
        return "?"
    if ctx.cwd:
        rel = os.path.relpath(path, ctx.cwd)
        if not rel.startswith(".."):
            return rel
    return path


def _with_kwarg(code: str, call: str, kwarg: str) -> Optional[str]:
    """The code line with `kwarg` added to its first `call(...)`, when the call closes on that line."""
    i = code.find(call + "(")
    if i < 0:
        return None
    depth = 0
    for j in range(i + len(call), len(code)):
        depth += {"(": 1, ")": -1}.get(code[j], 0)
        if depth == 0:
            inner = code[i + len(call) + 1:j].strip()
            return code[:j] + (", " if inner else "") + kwarg + code[j:]
    return None


def _read(path: str, limit: int = 1 << 20) -> str:
    """A text file's start, '' when unreadable."""
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""
