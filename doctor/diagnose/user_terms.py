"""Fixes in the project's own terms: which line set the device, which flag overrides it, which script creates a
missing file, which torchvision pairs with the installed torch.

Each refiner reads the job's own files (the frames of its traceback, its command, its working folder) and returns
what to say instead of the corpus row's generic words, or None when the row does not apply after all (a missing
log folder is not a missing input). Nothing here runs the job's code; a fix that was not tried says so.
"""

from __future__ import annotations

import ast
import difflib
import functools
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from dfdoctor import project as project_model
from dfdoctor.causes import DEPENDENCY_MISMATCH
from dfdoctor.project.options import read_options
from dfdoctor.project.paths import path_uses
from dfdoctor.project import typos
from dfdoctor.project.install import PIP_NAMES
from dfdoctor.project.source import Module
from dfdoctor.diagnose import installed_version, launcher_procs, torch_pairs
from dfdoctor.diagnose.rules_runtime import Context
from dfdoctor.diagnose.traceback import PyError, is_library
from dfdoctor.lazy_re import compile_later

NOT_TRIED = " (dfdoctor did not try this fix)"


@dataclass
class Told:
    """What a refiner says: a summary and a fix (empty: keep the row's), and evidence lines to add."""

    summary: str = ""
    fix: str = ""
    evidence: list[str] = field(default_factory=list)
    cause: Optional[str] = None  # another cause than the row's, where the refiner established it


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
    proj = project_of(ctx)
    option = (proj.option("device") or (proj.option("trainer.accelerator") if proj.options.kind == "lightning"
                                        else None)) if proj else None
    given = proj.given(option) if option else _given(ctx.argv, "device")
    if given is not None:
        evidence.append(f"the command sets {option.spelled(given) if option else '--device=' + given}")
    if option is not None:
        evidence.append(f"{option.where}: the option {option.flag} (default {option.default!r})" if option.where
                        else f"the script takes {option.flag}")
    if option is not None and (given is None or not given.startswith("cpu")):
        how = (f"replace {option.spelled(given)} with {option.spelled('cpu')}" if given is not None else
               f"add {option.spelled('cpu')} to the command")
        fix = (f"Run on the CPU: {how} (an option of this project, {option.flag}), or install a CUDA build of "
               "torch on a machine with a GPU" + NOT_TRIED + ".")
    elif option is None and proj is not None and _device_switch(proj) is not None:
        how, seen = _device_switch(proj)
        evidence += seen
        fix = f"Run on the CPU: {how}, or install a CUDA build of torch on a machine with a GPU" + NOT_TRIED + "."
    elif setting:
        fix = (f"Run on the CPU: set device = 'cpu' at {_short(script, ctx)}:{setting[0]}, or install a CUDA "
               "build of torch on a machine with a GPU" + NOT_TRIED + ".")
    elif script and len(_cuda_calls(script)) > 1:
        # no option, no device variable: each `.cuda()` is a line to change, and changing the first alone fails
        # at the next (pytorch-made's run.py: 74, 75, 81); the project runs as written only on a GPU
        lines = ", ".join(str(n) for n in _cuda_calls(script))
        evidence.append(f"{_short(script, ctx)} moves to CUDA with .cuda() at lines {lines} and has no device option")
        fix = (f"{_short(script, ctx)} has no option for the device and calls .cuda() at lines {lines}: run it on a "
               "machine with a GPU and a CUDA build of torch, or change each of those lines to a device picked with "
               "torch.cuda.is_available()" + NOT_TRIED + ".")
    else:
        fix = (f"Run on the CPU: at {err.user_where}, pick the device with torch.cuda.is_available() "
               "(device = 'cuda' if torch.cuda.is_available() else 'cpu'), or install a CUDA build of torch on a "
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


# Options by which projects ask for a GPU (`--cuda`, `--gpu 0`) or for the CPU (`--no-accel`, `--cpu`).
_ASKS_GPU = ("cuda", "gpu", "gpus", "use_cuda", "use_gpu", "accel", "gpu_id", "gpu_ids", "device_ids")
_ASKS_CPU = ("cpu", "use_cpu", "no_cuda", "no_accel", "no_gpu", "disable_cuda", "force_cpu", "no_mps")


def _device_switch(proj: project_model.Project) -> Optional[tuple[str, list[str]]]:
    """How this project's own options run it on the CPU when it has no device option: drop the option of the
    command that asks for a GPU (`--cuda`, `--gpu 0`), else add its CPU switch (`--no-accel`, `--cpu`)."""
    for name in _ASKS_GPU:
        option = proj.option(name)
        words = proj.words_of(option) if option else []
        if words:
            return (f"drop {' '.join(words)} from the command (it asks for a GPU; {option.flag} is declared at "
                    f"{option.where})", [f"the command gives {' '.join(words)}"])
    for name in _ASKS_CPU:
        option = proj.option(name)
        if option is not None and option.switch:
            return (f"add {option.flag} to the command (an option of this project, {option.where})",
                    [f"{option.where}: the switch {option.flag}"])
    return None


def nccl_backend(err: PyError, ctx: Context, m: re.Match) -> Told:
    """The backend the job asked for and how this project changes it (`--backend=gloo`)."""
    script = _user_script(err, ctx)
    setting = _module_assignment(script, "backend") if script else None
    proj = project_of(ctx)
    # only an option the project has (`--backend`, imagenet's `--dist-backend`): no `--backend` guessed
    option = (proj.option("backend") or proj.options.ending("backend")) if proj else None
    evidence = [f"{_short(script, ctx)}:{setting[0]}: backend = {setting[1]!r}"] if setting else []
    how = f"add {option.spelled('gloo')} to the command" if option else (
        f"set backend = 'gloo' at {_short(script, ctx)}:{setting[0]}" if setting else
        f"pass backend='gloo' to init_process_group at {err.user_where}")
    cuda = _cuda_assignments(script, "device") if script else []
    device = _cuda_default(proj)
    if device is not None:  # the ranks would fail next on that device, gloo or not
        how += f" and {device.spelled('cpu')} (its --device defaults to {device.default!r})"
        evidence.append(f"{device.where}: the option {device.flag} (default {device.default!r})")
    one = launcher_procs.one_process(list(ctx.argv), ctx.cwd)
    alone = ""
    if one is not None:
        line = one[0] + (f" {device.spelled('cpu')}" if device is not None else "")
        alone = f"; or start one process, which forms no process group, the project's own way: `{line}` ({one[1]})"
        evidence.append(one[1])
    fix = (f"On CPUs use the gloo backend: {how}{alone}; for NCCL, install a CUDA build of torch on a Linux machine "
           "with GPUs" + NOT_TRIED + ".")
    if cuda:
        fix += (" This script also sets a CUDA device (" + ", ".join(f"{_short(script, ctx)}:{n}" for n in cuda)
                + "): with gloo on a machine without GPUs it fails there next unless that line picks the CPU.")
    return Told("", fix, evidence)


def _cuda_default(proj) -> Optional[project_model.Option]:
    """The project's --device option when it defaults to CUDA and the command does not set it."""
    option = proj.option("device") if proj else None
    if option is None or not str(option.default or "").startswith("cuda") or proj.given(option) is not None:
        return None
    return option


def without_compile(err: PyError, ctx: Context, m: re.Match) -> Told:
    """How this project runs without torch.compile: its own option (nanoGPT's `--compile=False`, an argparse
    `--compile` switch the command gives, a `--no-compile`), else the line that calls torch.compile."""
    proj = project_of(ctx)
    off = ""
    option = proj.option("compile") if proj else None
    words = proj.words_of(option) if option else []
    if option is not None and option.switch and words:
        off = f"drop {' '.join(words)} from the command (the option {option.flag}, {option.where})"
    elif option is not None and not option.switch:
        off = f"add {option.spelled('False')} to the command (an option of this project, {option.where})"
    elif proj is not None and proj.option("no_compile") is not None:
        off = f"add {proj.option('no_compile').flag} to the command ({proj.option('no_compile').where})"
    elif proj is not None:
        line = next((f"{m_.rel}:{n.lineno}" for m_ in proj.files if m_.tree is not None for n in ast.walk(m_.tree)
                     if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "compile"
                     and getattr(n.func.value, "id", "") == "torch"), None)
        off = f"skip the torch.compile call at {line}" if line else ""
    if not off:
        return Told()
    return Told("", "Install a C/C++ compiler (apt-get install build-essential), or run without torch.compile: "
                + off + NOT_TRIED + ".", [])


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


# ---- versions ----------------------------------------------------------------------------------------
def pin_disagrees(err: PyError, ctx: Context, m: re.Match) -> Told:
    """`cannot import name` from an installed package whose version the project pins otherwise: the mismatch
    is established (the pin, the installed dist-info), and said so. In any other case the row's words stand."""
    module, name, path = m.group(2), m.group(1), m.group(3)
    proj = project_of(ctx)
    pin = typos.pin_of(proj.install if proj else None, module)
    top = module.split(".")[0]
    installed = installed_version.of_module(path, top) if pin and ctx.local else None
    if pin is None or installed is None or installed == pin[1]:
        return Told()
    return Told(f"{module} has no `{name}` (imported at {err.blame}): the installed {top} {installed} is not the "
                f"{pin[1]} that {pin[0]} pins.",
                f"Install the version the project pins: {shlex.quote(_python(ctx))} -m pip install "
                f"'{PIP_NAMES.get(top, top)}=={pin[1]}'{NOT_TRIED}.", [f"{pin[0]} pins {top}=={pin[1]}; installed: {top} {installed}"],
                DEPENDENCY_MISMATCH)


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


def output_dir(err: PyError, ctx: Context, m: re.Match) -> Optional[Told]:
    """A save into a folder that does not exist: which option of the project names that path, and the folder to
    create (for rows whose first group is the missing folder or the file's path)."""
    path = m.group(1)
    full = _resolve(path, ctx)
    proj = project_of(ctx)
    option = (proj.option_for_path(full) or proj.option_inside(full)) if proj else None
    folder = full if not os.path.splitext(full)[1] else os.path.dirname(full)
    missing = _first_missing(folder) or folder
    evidence = [f"{missing} does not exist now"]
    point = ""
    if option:
        given = proj.given(option)
        evidence.append(f"{option.flag} sets this path ({'the command gives ' + repr(given) if given is not None else 'default ' + repr(option.default)}{', ' + option.where if option.where else ''})")
        point = f", or point {option.flag} into a folder that exists"
    return Told("", f"Create the folder before the job starts (mkdir -p {shlex.quote(folder)}){point}, or make the "
                f"code create it before it saves: os.makedirs(folder, exist_ok=True) before {err.user_where}"
                + NOT_TRIED + ".", evidence)


def deleted_file(err: PyError, ctx: Context, m: re.Match) -> Optional[Told]:
    """A deletion of a file that is not there (`os.remove('stale.lock')`): None when the failing call deletes
    nothing (then it is a read: input_file)."""
    if not _deletes(err):
        return None
    full = _resolve(m.group(1), ctx)
    return Told("", "", [f"{err.user_where}: `{(err.user_code or '').strip()}` deletes {full}"])


def input_file(err: PyError, ctx: Context, m: re.Match) -> Optional[Told]:
    """A file the job reads: where it resolves against the job's cwd, and what in the repo creates it."""
    path = m.group(1)
    if _writes(err) or _deletes(err):
        return None  # opening for writing in a missing folder, or deleting, is not a missing input
    if any(f.replace("\\", "/").endswith("/subprocess.py") for f, _, _ in err.frames):
        return None  # a program the job runs (subprocess) is not a file it reads
    full = _resolve(path, ctx)
    evidence = [f"{path} resolves to {full} against the job's working folder {ctx.cwd}"
                if ctx.cwd and not os.path.isabs(path) else f"path: {full}"]
    missing = _first_missing(os.path.dirname(full))
    evidence.append(f"{missing} does not exist either" if missing else
                    f"its folder {os.path.dirname(full)} exists; the file does not" if not os.path.exists(full)
                    else f"{full} exists now (created since the job died?)")
    proj = project_of(ctx)
    maker = _creator(full, ctx, proj)
    option = proj.option_for_path(full) if proj else None
    value = (f"the command sets it to {proj.given(option)!r}" if proj.given(option) is not None else
             f"default {option.default!r}") + (f", {option.where}" if option.where else "") if option else ""
    part = proj.joined_into(full) if option else None
    point = (f"set {option.flag} to the one that is there (it is a part of this path, joined at {part.where}; "
             f"{value})" if part and proj.option_for_path(full) is option and not _prefix_of(proj, option, full)
             else f"point {option.flag} at where it is ({option.spelled('PATH')}; {value})" if option else
             "point the job at where it is")
    if option:
        evidence.append(f"{option.flag} sets this path" + (f" ({option.where})" if option.where else ""))
    fix = f"Create {path} before the job starts, or {point}."
    typo = _mistyped_value(proj, option, full) if option else None
    if typo:
        evidence.append(typo[1])
        fix = typo[0] + NOT_TRIED + "."
    there = _beside_script(path, err, ctx)
    if there and not maker:
        # the file is there, next to the code that opens it: the job was started from another folder
        evidence.append(f"{path} exists in {there}, the folder of {os.path.basename(err.user_frame[0])}")
        fix = (f"Launch it from {there}: `cd {shlex.quote(there)} && {_relaunched(ctx, there)}`; {path} is there, "
               f"and the job looks for it in the folder it starts in (now {ctx.cwd})"
               + (f"; or {point}" if option else "") + NOT_TRIED + ".")
    if maker:
        evidence.append(f"{_short(maker, ctx)} writes {os.path.basename(path)}")
        told = _readme_run(proj, maker)
        there = str(proj.root / os.path.dirname(told.file)) if told else None
        if told and not os.path.isabs(path) and ctx.cwd and os.path.realpath(there) != os.path.realpath(ctx.cwd):
            # the README runs both from its own folder: a relative path written there is not where this job looks
            fix = (f"Run both as the README does, from {there}: `cd {shlex.quote(there)} && {told.text}` writes "
                   f"{os.path.basename(path)} there ({told.where}), and the job looks for {path} in the folder it "
                   f"starts in (now {ctx.cwd}), so launch it from {there} too" + NOT_TRIED + ".")
        else:
            fix = (f"Run `{told.text if told else 'python ' + _short(maker, ctx)}` first (it writes "
                   f"{os.path.basename(path)}{'; ' + told.where + ' runs it' if told else ''}), then launch again"
                   + (f", or {point}" if option else "") + NOT_TRIED + ".")
        if "urlopen" in _read(maker) or "requests.get" in _read(maker) or "http" in _read(maker):
            fix += " It downloads its input: run it where there is network, or copy the files it fetches beside it."
    summary = f"The job reads {path} at {err.blame}, and it does not exist (looked for at {full})."
    return Told(summary, fix, evidence)


def _beside_script(path: str, err: PyError, ctx: Context) -> Optional[str]:
    """The folder of the job's file that opened `path` (relative) when `path` exists there and the job started in
    another folder; else None."""
    if os.path.isabs(path) or not err.user_frame or not ctx.cwd:
        return None
    there = os.path.dirname(_resolve(err.user_frame[0], ctx))
    if os.path.realpath(there) == os.path.realpath(ctx.cwd) or not os.path.exists(os.path.join(there, path)):
        return None
    return there


def _relaunched(ctx: Context, there: str) -> str:
    """The job's command as typed in `there`: each word naming a file there (its script) made relative to it."""
    words = []
    for w in ctx.argv:
        full = _resolve(w, ctx) if not w.startswith("-") else ""
        inside = full and os.path.isfile(full) and os.path.dirname(os.path.realpath(full)) == os.path.realpath(there)
        words.append(os.path.basename(full) if inside and w != ctx.argv[0] else w)
    return " ".join(shlex.quote(w) for w in words)


def mistyped_script(script: str, argv: list[str]) -> Optional[str]:
    """For a script that is not there (`mian.py`), the file beside where it was looked for whose name is closest
    (`main.py`), as a fix with the command that runs it; None when no name is close (or the folder is not here)."""
    path = Path(script)
    try:
        names = [e.name for e in path.parent.iterdir() if e.is_file() and e.suffix == path.suffix]
    except OSError:
        return None
    near = difflib.get_close_matches(path.name, names, n=1, cutoff=0.75)
    if not near:
        return None
    typed = [str(Path(a).with_name(near[0])) if Path(a).name == path.name else a for a in argv]
    return f"{path.name} is not in {path.parent}, {near[0]} is: run `{shlex.join(typed)}` (not tried)"


def _prefix_of(proj: project_model.Project, option, full: str) -> bool:
    """The option's value (given or default) is the path or a folder above it."""
    for value in (proj.given(option), option.default):
        if isinstance(value, str) and value.strip():
            v = os.path.normpath(value if os.path.isabs(value) else os.path.join(str(proj.cwd), value))
            if full == v or full.startswith(v.rstrip(os.sep) + os.sep):
                return True
    return False


def _writes(err: PyError) -> bool:
    """The failing call opens for writing: open(..., 'w'/'a'/'x') or a save in the user's line."""
    code = err.user_code or ""
    return bool(re.search(r"""open\([^)]*,\s*(?:mode\s*=\s*)?['"][wax]""", code) or
                re.search(r"\.(?:save|savez|to_csv|write_text|write_bytes|savefig)\(", code))


_DELETES = compile_later(r"(?:\bos\.(?:remove|unlink|rmdir)|\bshutil\.rmtree|\.unlink|\.rmdir|"
                         r"^\s*(?:remove|unlink|rmtree))\s*\(")


def _deletes(err: PyError) -> bool:
    """The failing call deletes: os.remove/unlink/rmdir, shutil.rmtree, Path.unlink/rmdir in the user's line."""
    return bool(_DELETES.search(err.user_code or ""))


def _creator(full: str, ctx: Context, proj: Optional[project_model.Project] = None) -> Optional[str]:
    """A script that writes the missing file's name: beside it (its folder or its parents up to the job's cwd),
    or run by the project's README. Never the job's own files: a job that reads or deletes F does not make it."""
    name = os.path.basename(full)
    own = {os.path.realpath(m.path) for m in proj.files} if proj else set()
    candidates: list[str] = []
    folder = os.path.dirname(full)
    stop = os.path.realpath(ctx.cwd) if ctx.cwd else None
    for _ in range(4):
        if os.path.isdir(folder):
            candidates += [os.path.join(folder, e) for e in sorted(os.listdir(folder)) if e.endswith(".py")]
        if stop and os.path.realpath(folder) == stop or os.path.dirname(folder) == folder:
            break
        folder = os.path.dirname(folder)
    if proj:
        for line in proj.readme:
            candidates += [str(proj.root / os.path.dirname(line.file) / w) for w in line.words if w.endswith(".py")]
    for cand in candidates:
        if os.path.realpath(cand) in own or not os.path.isfile(cand):
            continue
        if _writes_name(cand, name, ctx):
            return cand
    return None


def _writes_name(path: str, name: str, ctx: Context) -> bool:
    """The script writes a file called `name` (a write, a save or a download to a path ending in it)."""
    source = Module.read(Path(path), Path(ctx.cwd or "/"))
    options = read_options(source, ())
    for use in path_uses(source):
        if use.mode != "write":
            continue
        if use.hint and os.path.basename(use.hint) == name:
            return True
        option = options.find(use.dest) if use.dest and not use.hint else None  # open(args.save, 'wb')
        if option and isinstance(option.default, str) and os.path.basename(option.default) == name:
            return True
    return False


def _readme_run(proj: Optional[project_model.Project], script: str):
    """The README line that runs `script`, if one does."""
    if not proj:
        return None
    runs = proj.runs(Path(script))
    return runs[0] if runs else None


def project_of(ctx: Context) -> Optional[project_model.Project]:
    """The model of the job's project, read from its files here (None when the job ran elsewhere)."""
    if not ctx.local or not ctx.cwd:
        return None
    return _project(tuple(ctx.argv), ctx.cwd)


@functools.lru_cache(maxsize=8)
def _project(argv: tuple[str, ...], cwd: str) -> Optional[project_model.Project]:
    try:
        return project_model.read(list(argv), cwd)
    except (OSError, RecursionError, ValueError):  # files that cannot be read give the generic wording, no verdict lost
        return None


def option_near(word: str, ctx: Context):
    """The option of the job's project that a mistyped `word` (`--epocs`, `--trainer.max_iter=10`) most likely
    meant (a project_model Option: its flag as the project spells it, and where it is declared); None when none is
    near or the options are not known (for the bad-argument verdict: the closest valid option)."""
    proj = project_of(ctx)
    return proj.options.closest(word) if proj else None


def module_fix(module: str, ctx: Context) -> Optional[str]:
    """How to make a missing module importable in this project's terms: its own package installs with the
    project's install line; a distribution known to provide it (a requirements line, a known name) installs by that
    name; otherwise the project's own install lines, never a guessed name. None when nothing is known."""
    proj = project_of(ctx)
    if proj is None or proj.install is None:
        return None
    python = _python(ctx)
    found, why = proj.install.provider(module)
    if found == "-e":
        return (f"{why}: install the project into {python}: {proj.install.own_line(python)}" + NOT_TRIED + ".")
    if found:  # a requirement of the project says why; a known import name is installed as before
        note = why if why.endswith("names it") else "install it into the interpreter the job runs"
        return f"{shlex.quote(python)} -m pip install {shlex.quote(found)}   ({note})"
    lines = [f"`{r.text}` ({r.where})" for r in proj.install.readme]
    if proj.install.packaging:
        lines.append(f"`{python} -m pip install -e {proj.root}` (its {proj.install.packaging})")
    if any(f.endswith("requirements.txt") for f, _, _ in proj.install.requirements):
        lines.append(f"`{python} -m pip install -r {proj.root / next(f for f, _, _ in proj.install.requirements)}`")
    if not lines:
        return None
    return (f"Install what provides {module.split('.')[0]!r} into {python}: {why}; the project installs with "
            + "; ".join(lines) + NOT_TRIED + ".")


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


def _cuda_calls(script: str) -> list[int]:
    """Lines of the script that call `.cuda()` on something (`x.cuda()`, `model.cuda()`; not `torch.cuda.f()`)."""
    try:
        tree = ast.parse(_read(script))
    except (SyntaxError, ValueError):
        return []
    return sorted({n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and
                   isinstance(n.func, ast.Attribute) and n.func.attr == "cuda"})


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


def _mistyped_value(proj, option, full: str) -> Optional[tuple[str, str]]:
    """(fix, evidence) when the path the command gives `option` is missing and the closest name beside its first
    missing part exists (`--dataroot ./dta` where ./data is): the typo, corrected in the command's own value."""
    given = proj.given(option)
    missing = _first_missing(full) if given is not None else None
    if not missing or os.path.basename(missing) not in given:
        return None
    parent, name = os.path.dirname(missing), os.path.basename(missing)
    try:
        names = [e.name for e in os.scandir(parent) if not e.name.startswith(".")][:500]
    except OSError:
        return None
    near = difflib.get_close_matches(name, names, n=1, cutoff=0.7)
    if not near:
        return None
    fixed = given[::-1].replace(name[::-1], near[0][::-1], 1)[::-1]  # the last occurrence: the missing part
    return (f"Write {option.flag} {fixed} instead of {option.flag} {given}: {os.path.join(parent, near[0])} exists "
            f"and {missing} does not (the closest name in {parent})",
            f"{os.path.join(parent, near[0])} exists: the closest name to {name} in {parent}")


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
