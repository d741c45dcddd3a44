"""What a training job died of at run time, read from its exception: the GPU ran out of memory, a CUDA kernel
failed, shared memory or file descriptors ran out, a disk filled up, a download could not reach its host, a
collective timed out. Each reading names its cause id, what the message proved, and the fix for that cause.

Only the exception's own words (and what torch printed with it) are read here; what dfdoctor can observe on
the machine now (free space, GPU processes) is added as evidence and said to be "now".
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Callable, Optional

from dfdoctor import causes
from dfdoctor.diagnose import download_cache, download_root
from dfdoctor.diagnose.static_value import Reading, traced_value
from dfdoctor.diagnose.traceback import PyError
from dfdoctor.numbers import is_whole
from dfdoctor.lazy_re import compile_later

_SIZE = r"[\d.]+ [KMGTP]?i?B|\d+ bytes"


@dataclass
class Finding:
    """A cause read from an exception: its id, one sentence, the fix, and evidence lines."""

    cause: str
    summary: str
    fix: str
    evidence: list[str] = field(default_factory=list)


@dataclass
class Context:
    """What the readers may look at besides the exception: the output around it, the job's command and
    environment, and whether the job ran on this machine (so its GPUs and disks can be looked at now)."""

    output: str = ""
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    local: bool = True
    cwd: Optional[str] = None  # the job's working folder, against which its relative paths resolve
    python: Optional[str] = None  # the training interpreter
    stdout: str = ""  # the job's stdout, where a trainer prints what it does (`Downloading https://...`)


# ---- GPU memory ---------------------------------------------------------------------------------------
def cuda_oom(err: PyError, ctx: Context) -> Optional[Finding]:
    """`torch.OutOfMemoryError: CUDA out of memory. Tried to allocate X. GPU N has a total capacity of T of
    which F is free. ... Process P has M memory in use.`"""
    text = err.text
    if "CUDA out of memory" not in text and not (err.exc_type.endswith("OutOfMemoryError") and "CUDA" in text):
        return None
    asked = _re(rf"Tried to allocate ({_SIZE})", text)
    gpu = re.search(rf"GPU (\d+) has a total capac\w* of ({_SIZE}) of which ({_SIZE}) (?:is )?free", text)
    mine = _re(rf"this process has ({_SIZE}) memory in use", text)
    others = re.findall(rf"Process (\d+) has ({_SIZE}) memory in use", text)
    torch_mem = re.search(rf"({_SIZE}) is allocated by PyTorch, and ({_SIZE}) is reserved by PyTorch but "
                          r"unallocated", text)
    index = gpu.group(1) if gpu else None
    evidence = [f"asked for: {asked}" if asked else "the size asked for is not in the message"]
    if gpu:
        evidence.append(f"GPU {index}: {gpu.group(3)} free of {gpu.group(2)} total when it failed")
    if mine:
        evidence.append(f"the job itself held {mine}"
                        + (f" ({torch_mem.group(1)} allocated by PyTorch, {torch_mem.group(2)} reserved but "
                           "unallocated)" if torch_mem else ""))
    evidence += [f"pid {pid} also held {size} on that GPU (from the message)" for pid, size in others]
    now = _gpu_processes(index) if ctx.local else []
    evidence += now or ([] if ctx.local else ["GPU processes: not queried (the job ran on a target)"])
    where = f"GPU {index}" if index else "the GPU"
    summary = f"The job ran out of memory on {where}" + (f": it asked for {asked}" if asked else "") + \
        (f" with {gpu.group(3)} free of {gpu.group(2)}." if gpu else ".")
    stop = [pid for pid, _ in others]
    fix = ("Ask for less GPU memory: a smaller batch size (with gradient accumulation to keep the effective "
           "batch), shorter sequences, activation checkpointing, bf16 instead of fp32, or a smaller model.")
    if torch_mem and _bytes(torch_mem.group(2)) > max(_bytes(asked or "0 B"), 1 << 30):
        fix += " Much memory is reserved but unallocated: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."
    if stop:
        fix += (f" Other processes hold memory on {where}: stop them (pid {', '.join(stop)}) or run on another "
                "GPU (CUDA_VISIBLE_DEVICES).")
    return Finding(causes.CUDA_OOM, summary, fix, evidence)


def _gpu_processes(index: Optional[str]) -> list[str]:
    """The compute processes nvidia-smi lists now (on one GPU when its index is known), as evidence lines."""
    if not shutil.which("nvidia-smi"):
        return ["GPU processes now: nvidia-smi is not installed here"]
    args = ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"]
    if index is not None:
        args.insert(1, f"--id={index}")
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return [f"GPU processes now: nvidia-smi failed ({e})"]
    rows = [r.strip() for r in out.stdout.splitlines() if r.strip()]
    if out.returncode != 0:
        return [f"GPU processes now: nvidia-smi said {(out.stderr or out.stdout).strip()[:200]}"]
    return [f"holds memory there now: {r}" for r in rows] or ["no other process holds memory there now (nvidia-smi)"]


# ---- CUDA kernel and device errors ----------------------------------------------------------------------
_CUDA_KINDS = [
    ("device-side assert triggered", "a device-side assert",
     "A kernel's own check failed, most often an index out of range: a label >= the number of classes, a token "
     "id >= the vocabulary size, a negative index. The assert line above the traceback names the kernel and the "
     "condition. Run with CUDA_LAUNCH_BLOCKING=1 so the traceback points at the op, or run one step on the CPU, "
     "where the same mistake raises an IndexError with the values."),
    ("illegal memory access", "an illegal memory access",
     "A kernel read or wrote outside its memory: usually a custom CUDA/Triton kernel or an extension built "
     "against another torch or CUDA version. Run with CUDA_LAUNCH_BLOCKING=1 to find the op, or under "
     "`compute-sanitizer python ...` to find the kernel; rebuild extensions for the installed torch."),
    ("no kernel image is available", "no kernel image for this GPU", None),
    ("invalid device ordinal", "an invalid device ordinal", None),
]


def cuda_error(err: PyError, ctx: Context) -> Optional[Finding]:
    """`CUDA error: <what>` from torch (RuntimeError, torch.AcceleratorError): which kind, and its fix."""
    text = err.text
    if not any(m in text for m in ("CUDA error", "cudaError", "CUDA kernel errors", "CUDA_ERROR_")):
        return None
    for marker, kind, fix in _CUDA_KINDS:
        if marker in text:
            break
    else:
        marker, kind, fix = "", "a CUDA error", ("Run with CUDA_LAUNCH_BLOCKING=1 so the traceback points at "
                                                 "the failing op; the CUDA error's own words say what failed.")
    said = _re(r"CUDA error: ([^\n]+)", text) or _re(r"(CUDA_ERROR_\w+: [^\n]+)", text) or err.message
    evidence = [f"CUDA error: {said}"]
    if marker == "device-side assert triggered":
        evidence += [f"assert: {l.strip()[:300]}" for l in ctx.output.splitlines() if "Assertion" in l][:3]
    if marker == "no kernel image is available":
        fix, more = _arch_fix(ctx)
        evidence += more
    if marker == "invalid device ordinal":
        fix, more = _ordinal_fix(ctx)
        evidence += more
    return Finding(causes.CUDA_ERROR, f"A CUDA operation failed with {kind} at {err.user_where}.", fix, evidence)


def _arch_fix(ctx: Context) -> tuple[str, list[str]]:
    """The GPU's compute capability and the build's arch list, from torch's own warning when it printed one."""
    m = re.search(r"(\S[^\n]*?) with CUDA capability (sm_\d+) is not compatible with the current PyTorch "
                  r"installation\.\s*The current PyTorch install supports CUDA capabilities ([^\n.]+)", ctx.output)
    if m:
        gpu, sm, archs = m.group(1).strip(), m.group(2), m.group(3).strip()
        return (f"This torch build has no kernels for {sm} ({gpu}); it supports {archs}. Install a torch build "
                f"whose arch list includes {sm} (a wheel for a newer CUDA), or rebuild the extension with "
                f"TORCH_CUDA_ARCH_LIST set to include {sm[3:-1]}.{sm[-1]}.",
                [f"GPU: {gpu}, {sm}", f"torch build supports: {archs}"])
    return ("The installed torch, or a compiled extension, has no kernels for this GPU's architecture. Compare "
            "`python -c 'import torch; print(torch.cuda.get_device_capability(), torch.cuda.get_arch_list())'`, "
            "then install a torch build whose arch list includes the GPU's sm, or rebuild the extension with "
            "TORCH_CUDA_ARCH_LIST naming it.",
            ["the GPU's sm and the build's arch list were not in the output (torch printed no compatibility "
             "warning, so the missing kernel is likely in an extension)"])


def _ordinal_fix(ctx: Context) -> tuple[str, list[str]]:
    """More ranks or a higher device index than visible GPUs: say how many were asked for and are visible."""
    evidence = []
    nproc = _option(ctx.argv, "--nproc_per_node", "--nproc-per-node", "--num_processes", "--num-processes")
    if nproc:
        evidence.append(f"ranks per node asked for: {nproc}")
    cvd = ctx.env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        evidence.append(f"CUDA_VISIBLE_DEVICES={cvd!r}")
    count = _gpu_count() if ctx.local else None
    if count is not None:
        evidence.append(f"GPUs on this machine (nvidia-smi -L): {count}")
    fix = ("The job asked for a GPU index that is not visible. Start no more ranks per node than visible GPUs "
           "(torchrun --nproc_per_node N with N <= the GPU count), bind each rank to its LOCAL_RANK "
           "(torch.cuda.set_device(int(os.environ['LOCAL_RANK']))), and check CUDA_VISIBLE_DEVICES.")
    if nproc and count is not None and is_whole(nproc) and int(nproc) > count:
        fix = f"Start {count} rank(s) per node, not {nproc}: --nproc_per_node {count}. " + fix
    return fix, evidence


def _gpu_count() -> Optional[int]:
    """How many GPUs nvidia-smi lists here, or None when it cannot say."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return sum(1 for l in out.stdout.splitlines() if l.startswith("GPU ")) if out.returncode == 0 else None


# ---- host resources -----------------------------------------------------------------------------------
SHM_MARKERS = ("out of shared memory", "shared memory limit", "unable to allocate shared memory",
               "unable to write to file </torch_", "unable to open shared memory", "/dev/shm")


def shm_exhausted(err: PyError, ctx: Context) -> Optional[Finding]:
    """DataLoader workers die with a bus error (or "unable to write to file </torch_...>") when /dev/shm is
    too small for the batches they hand over; or creating a multiprocessing lock or queue fails with ENOSPC (a
    POSIX semaphore is a file in /dev/shm, and the message names no path, so it read as a full disk)."""
    text = err.text + "\n" + "\n".join(_near(ctx.output, "DataLoader worker"))
    bus = "DataLoader worker" in text and ("Bus error" in text or "shared memory" in text)
    semaphore = _shm_object(err)
    if not bus and not semaphore and not any(m in text for m in SHM_MARKERS):
        return None
    if semaphore:
        return _shm_semaphore_full(err, ctx, semaphore)
    evidence = [f"message: {l.strip()[:300]}" for l in (err.text.splitlines()[:2])]
    if ctx.local:
        evidence.append(_df_line("/dev/shm", "now"))
    who = "DataLoader workers ran out of shared memory (/dev/shm): a worker died handing a batch over" if \
        "DataLoader" in text or "torch_" in text else f"The job ran out of shared memory (/dev/shm) at {err.user_where}"
    return Finding(causes.SHM_EXHAUSTED, f"{who}.", "Give the job more shared memory: `docker run --shm-size=8g` (or "
                   "--ipc=host); in Kubernetes an emptyDir with medium: Memory mounted at /dev/shm. Or use fewer "
                   "DataLoader workers (num_workers), smaller batches, or num_workers=0.", evidence)


# The standard library's and torch's frames that create objects in /dev/shm: a semaphore (SemLock, behind every
# multiprocessing Lock, Queue and DataLoader worker queue) or a shared-memory block.
_SHM_CREATORS = (("multiprocessing/synchronize.py", "a multiprocessing semaphore (SemLock)"),
                 ("multiprocessing/shared_memory.py", "a multiprocessing shared-memory block"),
                 ("multiprocessing/heap.py", "a multiprocessing shared heap"),
                 ("torch/multiprocessing/reductions.py", "a tensor shared with another process"))


def _shm_object(err: PyError) -> Optional[str]:
    """What the job was creating in /dev/shm when ENOSPC came: read from the frame that raised it."""
    if not any(m in err.text for m in _ENOSPC[:2]):
        return None
    for file, _, code in reversed(err.frames):
        path = file.replace("\\", "/")
        what = next((w for tail, w in _SHM_CREATORS if path.endswith(tail)), None)
        if what or "SemLock(" in (code or ""):
            return what or _SHM_CREATORS[0][1]
    return None


def _shm_semaphore_full(err: PyError, ctx: Context, what: str) -> Finding:
    """ENOSPC creating a semaphore or shared block: /dev/shm is full, with the project's own workers option."""
    evidence = [f"message: {err.headline[:300]}", f"raised creating {what}, which lives in /dev/shm",
                f"the job's line: {err.user_where}" + (f": {err.user_code.strip()}" if err.user_code else "")]
    if ctx.local:
        evidence.append(_df_line("/dev/shm", "now (dfdoctor's view; a container or namespace has its own)"))
    workers = _workers_option(ctx)
    fewer = f"fewer DataLoader workers ({workers}), or none" if workers else \
        "fewer DataLoader workers (num_workers), or num_workers=0"
    if workers:
        evidence.append(f"the project's option for DataLoader workers: {workers}")
    return Finding(causes.SHM_EXHAUSTED, f"Shared memory (/dev/shm) is full: the job could not create {what} at "
                   f"{err.user_where}. /dev/shm is a tmpfs in RAM sized apart from the disks (a container's "
                   "--shm-size), so this is not a full disk.",
                   "Give the job more shared memory: `docker run --shm-size=8g` (or --ipc=host); in Kubernetes an "
                   f"emptyDir with medium: Memory mounted at /dev/shm; or use {fewer}; remove stale files left in "
                   "/dev/shm by killed jobs (not tried).", evidence)


def _workers_option(ctx: Context) -> Optional[str]:
    """The project's option that sets its DataLoader workers (`--workers`, `--num_workers`, default shown)."""
    from dfdoctor import project as project_model  # read only when this finding is made

    if not ctx.local or not ctx.cwd:
        return None
    try:
        proj = project_model.read(list(ctx.argv), ctx.cwd)
    except (OSError, RecursionError, ValueError):
        return None
    opt = next((o for o in proj.options.options if "worker" in o.dest.lower()), None)
    if opt is None:
        return None
    flag = next((f for f in opt.flags if f.startswith("--")), opt.flags[0] if opt.flags else opt.dest)
    return f"{flag}, default {opt.default!r}" if opt.default is not None else flag


def fd_exhausted(err: PyError, ctx: Context) -> Optional[Finding]:
    """`[Errno 24] Too many open files` (or torch's "received 0 items of ancdata"): the open-file limit ran out."""
    text = err.text
    if "Too many open files" not in text and "Errno 24" not in text and "received 0 items of ancdata" not in text:
        return None
    evidence = [f"message: {err.headline[:300]}"]
    limit = _nofile(ctx)
    if limit:
        evidence.append(limit)
    return Finding(causes.FD_EXHAUSTED, f"The job ran out of file descriptors at {err.user_where}.",
                   "Raise the open-file limit where the job starts (`ulimit -n 65536` in the launching shell, "
                   "LimitNOFILE= in a systemd unit, `docker run --ulimit nofile=65536:65536`); with DataLoader "
                   "workers, torch.multiprocessing.set_sharing_strategy('file_system') passes tensors without "
                   "one descriptor each; close files opened per sample.", evidence)


def _nofile(ctx: Context) -> Optional[str]:
    """The open-file limit dfdoctor sees here, which the job inherits unless its launcher changes it."""
    if not ctx.local:
        return None
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return f"open-file limit where dfdoctor runs now: soft {soft}, hard {hard}"


_ENOSPC = ("No space left on device", "Errno 28", "Disk quota exceeded", "Errno 122")
_SHORT_WRITE = compile_later(r"\d+ requested and \d+ written")  # numpy's tofile on a full file system: no errno
_SHM_ROOTS = ("/dev/shm", "/run/shm")
_EROFS = ("Read-only file system", "Errno 30")
_TORCH_WRITER = ("PytorchStreamWriter failed writing", "file write failed", "unexpected pos")
_PATH = compile_later(r"""['"](/[^'"\n]+)['"]""")


def disk_full(err: PyError, ctx: Context) -> Optional[Finding]:
    """ENOSPC while writing (a checkpoint, a cache), or torch.save's writer failing on a file system that is
    full now: named by the folder that filled, its file system (where it is mounted, its size, what is free) and
    the line that wrote there. A read-only file system (EROFS, or a writer failing on one) is said as such: it
    reports no free space, and freeing space would not help."""
    text = err.text
    paths = _candidate_paths(err, ctx)
    read_only = [p for p in paths if ctx.local and _read_only(p)]
    if any(m in text for m in _EROFS) or (any(m in text for m in _TORCH_WRITER) and read_only):
        return _read_only_finding(err, ctx, (read_only or paths or [None])[0])
    full = [p for p in paths if ctx.local and (_free(p) or 0) < (1 << 20) and _free(p) is not None]
    short = _SHORT_WRITE.search(text)
    if (any(m in text for m in _ENOSPC) or short) and not full:
        shm = _shm_target(err, ctx)
        if shm:
            return _shm_write_full(err, ctx, shm)
    if any(m in text for m in _ENOSPC):
        proven = "the error says so"
    elif short:
        proven = f"a write stopped short ({short.group(0)}): the file system had no more room"
    elif any(m in text for m in _TORCH_WRITER) and full:
        proven = f"torch.save's writer failed, and the file system of {full[0]} has {_free(full[0])} bytes free now"
    else:
        return None
    where = (full or paths or [None])[0]
    folder = _folder(where) if where else None
    evidence = [f"message: {err.headline[:300]}", proven, _wrote_at(err)]
    if folder and ctx.local:
        evidence.append(_df_line(folder, "now"))
    fs = f", on {_mount_words(folder)}" if folder and ctx.local else ""
    return Finding(causes.DISK_FULL, f"The job ran out of disk space while writing"
                   + (f" into {folder}{fs}" if folder else "") + f" (at {err.user_where}).",
                   f"Free space on the file system of {folder or 'the folder it writes to'} "
                   f"(df -h {shlex.quote(folder or '.')}; df -i for inodes), write checkpoints to a file system "
                   "with room, or keep fewer of them (delete old checkpoints before saving a new one).", evidence)


def _read_only_finding(err: PyError, ctx: Context, where: Optional[str]) -> Finding:
    folder = _folder(where) if where else None
    mount = _mount_point(folder) if folder and ctx.local else None
    evidence = [f"message: {err.headline[:300]}", _wrote_at(err)]
    if mount:
        evidence.append(f"{mount} is mounted read-only")
    return Finding(causes.READ_ONLY_FS, "The job could not write" + (f" into {folder}" if folder else "")
                   + f": its file system is read-only{f' (mounted at {mount})' if mount else ''} "
                   f"(at {err.user_where}).", "Write checkpoints and outputs to a writable file system (a scratch "
                   "or home folder), or mount this one read-write; free space would not help.", evidence)


def _folder(path: str) -> str:
    """The folder a write went into: the path itself when it is one, else its parent."""
    return path if os.path.isdir(path) else (os.path.dirname(path) or path)


def _wrote_at(err: PyError) -> str:
    """The line of the job's own code that made the write, with its source when the traceback showed it."""
    code = err.user_code if err.user_frame else err.code
    return f"the write: {err.user_where}" + (f": {code.strip()}" if code else "")


def _existing(path: str) -> str:
    p = path
    while p and not os.path.exists(p):
        p = os.path.dirname(p)
    return p or "/"


def _mount_point(path: str) -> str:
    """The mount point of the file system holding `path` (its nearest existing folder)."""
    p = os.path.realpath(_existing(path))
    while not os.path.ismount(p):
        p = os.path.dirname(p)
    return p


def _read_only(path: str) -> bool:
    try:
        return bool(os.statvfs(_existing(path)).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _mount_words(path: str) -> str:
    """`the file system mounted at M (SIZE, FREE free now)`, for a summary."""
    try:
        st = os.statvfs(_existing(path))
    except OSError:
        return f"the file system mounted at {_mount_point(path)}"
    total, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    return f"the file system mounted at {_mount_point(path)} ({_size(total)}, {_size(free)} free now)"


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _shm_target(err: PyError, ctx: Context) -> Optional[str]:
    """The shared-memory path a failed write went to: named in the error, its code line, the lines before it, the
    command or the job's environment (CACHE_DIR=/dev/shm/x), or, failing those, written in the failing frame's
    source (a default such as `cache = os.environ.get("CACHE_DIR", "/dev/shm/cache")`). /dev/shm is a tmpfs in
    memory, sized apart from every disk (a container's --shm-size): a full one is not a full disk."""
    said = "\n".join([err.text, err.code or "", err.user_code or "", *err.tail, *err.before.splitlines()[-5:],
                      *ctx.argv, *ctx.env.values()])
    roots = "|".join(map(re.escape, _SHM_ROOTS))
    found = re.findall(r"(?<![\w.])((?:%s)(?:/[\w.@%%+-]+)*)" % roots, said)
    source = err.user_frame[0] if err.user_frame else err.file
    if ctx.local and source and os.path.isfile(source):
        try:
            with open(source, errors="replace") as f:
                found += re.findall(r"""['"]((?:%s)(?:/[^'"\n]*)?)['"]""" % roots, f.read(1 << 20))
        except OSError:
            pass
    return max(found, key=len) if found else None  # the most precise of them: /dev/shm/cache over /dev/shm


def _shm_write_full(err: PyError, ctx: Context, path: str) -> Finding:
    """A write into /dev/shm that found no room: shared memory ran out, not a disk."""
    evidence = [f"message: {err.headline[:300]}", f"the write went to shared memory: {path}"]
    if ctx.local:
        evidence.append(_df_line("/dev/shm", "now (dfdoctor's view; a container or namespace has its own)"))
    return Finding(causes.SHM_EXHAUSTED, f"The job ran out of shared memory writing under {path} (at "
                   f"{err.user_where}): /dev/shm is a tmpfs in RAM, sized apart from the disks.",
                   "Give the job more shared memory (`docker run --shm-size=8g` or --ipc=host; in Kubernetes an "
                   "emptyDir with medium: Memory at /dev/shm), or write that data to a disk folder instead of "
                   f"{path} (not tried).", evidence)


def gpu_ranks_without_gpus(err: PyError, ctx: Context) -> Optional[Finding]:
    """torchrun's `--nproc_per_node=gpu` (one rank per GPU) where torch sees none: torchrun itself raises
    "Cuda is not available." from its own code, so the line at fault is the user's launch line, not torchrun's."""
    torchrun = any("determine_local_world_size" in (code or "") or f.replace("\\", "/").endswith(
        "torch/distributed/run.py") for f, _, code in err.frames)
    if "Cuda is not available" not in err.text or not torchrun:
        return None
    asked = next((a for i, a in enumerate(ctx.argv) if re.fullmatch(r"--nproc[_-]per[_-]node(?:=gpu)?", a) and
                  (a.endswith("=gpu") or ctx.argv[i + 1:i + 2] == ["gpu"])), "--nproc_per_node=gpu")
    typed = asked if asked.endswith("=gpu") else f"{asked} gpu"
    launcher = os.path.basename(ctx.argv[0]) if ctx.argv else "torchrun"
    return Finding(causes.CUDA_UNAVAILABLE, f"The launch line asks {launcher} for one rank per GPU ({typed}), and "
                   "torch sees no GPU here: torchrun stopped before starting any rank.",
                   f"Give the number of ranks instead of `gpu` (e.g. {typed.replace('gpu', '2')}, with the gloo "
                   "backend on CPUs), or run where torch sees GPUs (a CUDA build of torch, CUDA_VISIBLE_DEVICES); "
                   "`dfdoctor check --only cuda.init` says what torch sees (not tried).",
                   [f"message: {err.headline[:300]}", f"the launch line: {' '.join(ctx.argv)[:300]}"])


_ASSERT_EXISTS = compile_later(r"^\s*assert\s+(?:os\.path\.(?:exists|isfile|isdir|lexists)\((?P<arg>.+?)\)|"
                               r"(?:Path|pathlib\.Path)\((?P<arg2>.+?)\)\.(?:exists|is_file|is_dir)\(\)|"
                               r"(?P<arg3>[\w.]+)\.(?:exists|is_file|is_dir)\(\))\s*(?:,|$)")


def assert_path_missing(err: PyError, ctx: Context) -> Optional[Finding]:
    """`assert os.path.exists(path)` failed: a bare AssertionError that names no path. The path is read from the
    assert's own expression, followed through the script (its assignments, its options and their defaults, and
    the command's values): input-missing with the path and the option that sets it."""
    if not err.exc_type.endswith("AssertionError") or not err.user_frame:
        return None
    m = _ASSERT_EXISTS.match(err.user_code or "")
    if not m:
        return None
    expr_text = m.group("arg") or m.group("arg2") or m.group("arg3")
    source, line = err.user_frame
    path, options = _static_path(err, expr_text, ctx) if ctx.local else (None, [])
    full = path if path is None or os.path.isabs(path) or not ctx.cwd else \
        os.path.normpath(os.path.join(ctx.cwd, path))
    if full and os.path.exists(full):
        return None  # it is there now: the assert failed on something else (a path the job made later?)
    evidence = [f"the assert: {(err.user_code or '').strip()[:200]}"]
    if path:
        evidence.append(f"{expr_text} is {path!r} (read from the script and the command)" +
                        (f"; looked for at {full}: missing" if full else ""))
    else:
        evidence.append(f"the value of {expr_text} could not be read from the script: it is computed")
    if options:
        evidence.append(f"set by {', '.join(options)}")
    what = f"{path}" if path else f"the path in `{expr_text}`"
    summary = f"The job checks that {what} exists at {err.user_where}, and it does not" + \
        (f" (looked for at {full})." if path and full != path else ".")
    fix = f"Create {what} before the job starts, or point the job at where it is" + \
        (f" with {options[0].split(' (')[0]}" if options else "") + " (not tried)."
    if options and "(default" not in options[0]:
        fix = f"{options[0]} names a path that does not exist: point it at where the data is (not tried)."
    return Finding(causes.INPUT_MISSING, summary, fix, evidence)


def _static_path(err: PyError, expr_text: str, ctx: Context) -> tuple[Optional[str], list[str]]:
    """The value of the assert's path expression, read statically from the job's source and command line,
    following a parameter into the frames that called it."""
    try:
        expr = ast.parse(expr_text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None, []
    frames = [(_resolve_in(f[0], ctx), f[1], f[2]) for f in err.frames if not f[0].startswith("<")]
    user = (_resolve_in(err.user_frame[0], ctx), err.user_frame[1])
    index = next((i for i in range(len(frames) - 1, -1, -1) if tuple(frames[i][:2]) == user), None)
    if index is None:
        frames, index = [(user[0], user[1], err.user_code)], 0
    return traced_value(frames, index, expr, list(ctx.argv))


def _resolve_in(path: str, ctx: Context) -> str:
    """A traceback's file as the job saw it: a relative one against its working folder."""
    return path if os.path.isabs(path) or not ctx.cwd else os.path.join(ctx.cwd, path)


# a call that writes a file, on the job's own line: open(.., 'w'/'wb'/'a'/'x'), a save, a dump, a to_*
_WRITES = compile_later(r"""\bopen\(.*,\s*(?:mode\s*=\s*)?['"][rbt+]*[wax]|\.(?:save|savez\w*|savetxt|savefig|"""
                        r"""to_csv|to_json|to_parquet|to_pickle|write_text|write_bytes|save_pretrained)\(|"""
                        r"""\b(?:torch|np|numpy|pickle|json|joblib)\.(?:save|dump)\(""")


def output_dir_missing(err: PyError, ctx: Context) -> Optional[Finding]:
    """`FileNotFoundError: ... 'out/run1/model.bin'` raised by the job's own write (open(path, 'wb'), np.save,
    df.to_csv...), whose folder does not exist: the output folder is missing, not an input."""
    m = re.search(r"No such file or directory: '([^']+)'", err.text)
    code = err.user_code or err.code or ""
    if not m or not _WRITES.search(code) or m.group(1).endswith(".log"):
        return None  # a log opened in a missing folder is log-dir-missing (known_failures)
    path = m.group(1)
    folder = os.path.dirname(path) or "."
    where = folder if os.path.isabs(folder) or not ctx.cwd else os.path.join(ctx.cwd, folder)
    evidence = [f"message: {err.headline[:300]}", f"the job's line writes: {code.strip()[:200]}"]
    if ctx.local:
        if os.path.isdir(where):
            return None  # the folder is there: something else is missing (a dangling link, a race)
        evidence.append(f"{where} does not exist now")
    options = _options_of(path, code, err, ctx) if ctx.local else []
    point = f"pass {options[0].split(' (')[0].split('=')[0].split()[0]}=AN_EXISTING_FOLDER" if options else \
        "point the job's output at an existing folder"
    if options:
        evidence.append(f"the path comes from {', '.join(options)}")
    return Finding(causes.OUTPUT_DIR_MISSING, f"The job writes {path} at {err.user_where}, and its folder {folder} "
                   "does not exist.", f"Create the folder before the job writes (mkdir -p {shlex.quote(folder)}, or "
                   f"os.makedirs(folder, exist_ok=True) before the write), or {point} (not tried).", evidence)


def _options_of(path: str, code: str, err: PyError, ctx: Context) -> list[str]:
    """The command-line options that set `path`, read from the failing line's call (its argument whose value,
    followed through the script, is that path): `--out-dir (default 'out/run1')`."""
    from dfdoctor.project.source import tree_of  # start-up: the project model, for a traceback alone (issue 45)
    text = code.strip()
    try:
        line = ast.parse(text + "\n    pass" if text.endswith(":") else text)
    except (SyntaxError, ValueError):
        return []
    tree = tree_of(err.user_frame[0] if err.user_frame else err.file or "")
    if tree is None:
        return []
    for call in (n for n in ast.walk(line) if isinstance(n, ast.Call)):
        for arg in call.args:
            reading = Reading(tree, list(ctx.argv))
            if reading.value(arg) == path and reading.options:
                return list(dict.fromkeys(reading.options))
    return []


def _candidate_paths(err: PyError, ctx: Context) -> list[str]:
    """Paths the failed write may have gone to: quoted in the error or its code line, absolute paths in the
    job's command, or printed in the last lines before the traceback ("saving to /ckpt")."""
    found = _PATH.findall("\n".join([err.text, err.code or "", *err.tail]))
    found += [a.split("=", 1)[-1] for a in ctx.argv[1:] if a.split("=", 1)[-1].startswith("/")]
    found += re.findall(r"(?<![\w.])(/[\w./-]+)", "\n".join(err.before.splitlines()[-5:]))
    return [p for p in dict.fromkeys(found) if not p.startswith(("/usr/", "/proc/", "/dev/")) and not p.endswith(".py")]


def _free(path: str) -> Optional[int]:
    """Bytes free to an unprivileged writer on the file system holding `path` (its nearest existing folder)."""
    p = path
    while p and not os.path.exists(p):
        p = os.path.dirname(p)
    try:
        st = os.statvfs(p or "/")
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _df_line(path: str, when: str) -> str:
    """`df` of one path as an evidence line."""
    p = path
    while p and not os.path.exists(p):
        p = os.path.dirname(p)
    try:
        st = os.statvfs(p or "/")
    except OSError as e:
        return f"{path}: cannot stat its file system ({e.strerror})"
    total, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    return f"file system of {path} {when}: {free / 2**20:.1f} MiB free of {total / 2**20:.1f} MiB"


# ---- network ------------------------------------------------------------------------------------------
_NET = ("Temporary failure in name resolution", "Name or service not known", "Network is unreachable",
        "Failed to establish a new connection", "Max retries exceeded with url", "urlopen error",
        "couldn't connect to", "Connection refused", "No route to host", "OfflineModeIsEnabled",
        "LocalEntryNotFoundError", "Could not resolve host", "Read timed out", "getaddrinfo failed")
_URL = compile_later(r"https?://[^\s'\")>]+|host='([^']+)'")


def download_failed(err: PyError, ctx: Context) -> Optional[Finding]:
    """A model or data download that could not reach its host (no network, no DNS, offline mode)."""
    text = err.text + "\n" + "\n".join(err.tail)
    hit = next((m for m in _NET if m in text), None)
    if not hit:
        return None
    urls = _pool_urls(err.text) or [m.group(1) or m.group(0) for m in _URL.finditer(err.text)] or \
        [m.group(1) or m.group(0) for m in _URL.finditer(ctx.output)] or \
        [m.group(0) for m in _URL.finditer(ctx.stdout) if not m.group(1)]
    target = urls[-1] if urls else None
    evidence = [f"message: {err.headline[:300]}"]
    proxy = [k for k in ("HTTPS_PROXY", "https_proxy", "HF_ENDPOINT", "HF_HUB_OFFLINE") if k in ctx.env]
    evidence += [f"{k}={ctx.env[k]!r} in the job's environment" for k in proxy]
    lib = download_cache.library_of(f for f, _, _ in err.frames)
    if lib is not None:  # a library with a cache of its own (tiktoken): its variable, not the hub's
        fix, cache = download_cache.for_the_job(lib[1], ctx.env)
        return Finding(causes.DOWNLOAD_FAILED, f"A download failed at {err.blame} ({lib[0]}): this machine could "
                       f"not reach {target or 'the server'} ({hit}).", fix, evidence + cache)
    hub = any(w in text or any(w in f for f, _, _ in err.frames) for w in ("huggingface", "transformers",
                                                                            "/datasets/", "HF_HUB", "hf_hub"))
    told = None if hub or not ctx.local else _own_download(err, ctx)
    if told is None and not hub:  # no hub's cache to name, and the line that downloads was not read
        return Finding(causes.DOWNLOAD_FAILED, "A download failed at " + err.blame + ": this machine could not "
                       "reach " + (target or "the server") + f" ({hit}).",
                       f"Fetch {target or 'the files it downloads'} where there is network and make the job read "
                       "the local copy (its library's cache folder, or a path of its own), or point HTTPS_PROXY at a "
                       "proxy reachable from this machine (not tried).", evidence)
    if told is None:
        return Finding(causes.DOWNLOAD_FAILED, "A download failed at " + err.blame + ": this machine could not "
                       "reach " + (target or "the server") + f" ({hit}).",
                       "Fetch the files where there is network (`huggingface-cli download`, or the same script "
                       "once), copy the cache here (HF_HOME, TORCH_HOME, the datasets cache) and run with "
                       "HF_HUB_OFFLINE=1; or point HTTPS_PROXY / HF_ENDPOINT at a proxy or mirror reachable from "
                       "this machine.", evidence)
    url, fix, more = told
    return Finding(causes.DOWNLOAD_FAILED, f"The job downloads {url or target or 'its data'} at {err.blame}, and "
                   f"this machine could not reach {target or 'the server'} ({hit}).", fix, evidence + more)


_POOL = compile_later(r"(HTTPS?)ConnectionPool\(host='([^']+)', port=(\d+)\): Max retries exceeded with url: (/\S*)")


def _pool_urls(text: str) -> list[str]:
    """The URLs urllib3 names in pieces (`HTTPSConnectionPool(host='h', port=443): Max retries exceeded with url:
    /p`), whole again: `https://h/p` (the port only where it is not the scheme's own)."""
    out = []
    for scheme, host, port, path in _POOL.findall(text):
        scheme = scheme.lower()
        at = "" if (scheme, port) in (("https", "443"), ("http", "80")) else f":{port}"
        out.append(f"{scheme}://{host}{at}{path}")
    return out


def _own_download(err: PyError, ctx: Context) -> Optional[tuple[Optional[str], str, list[str]]]:
    """A download the job's own code makes (requests.get, urlopen, a plain URL): the URL read from its line, and
    the files whose presence makes the job skip it (`if os.path.isfile(os.path.join(path, 'cora.content')) ...
    else: download`), so the fix says what to put where, in the job's terms. None when the line is not read."""
    from dfdoctor.project.source import tree_of  # start-up: the project model, for a traceback alone (issue 45)
    if not err.user_frame:
        return None
    frames = [(_resolve_in(f[0], ctx), f[1], f[2]) for f in err.frames if not f[0].startswith("<")]
    file, line = _resolve_in(err.user_frame[0], ctx), err.user_frame[1]
    index = next((i for i in range(len(frames) - 1, -1, -1) if tuple(frames[i][:2]) == (file, line)), None)
    tree = tree_of(file)
    if tree is None:
        return None
    url = None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno == line]
    for call in calls:
        for arg in call.args[:1]:
            value = traced_value(frames, index, arg, list(ctx.argv))[0] if index is not None else \
                Reading(tree, list(ctx.argv)).value(arg)
            if value and value.startswith(("http://", "https://", "ftp://")):
                url = value
    short = os.path.relpath(file, ctx.cwd) if ctx.cwd and file.startswith(ctx.cwd.rstrip("/") + "/") else file
    guard = _download_guard(tree, line, ctx)
    printed = [m.group(0) for m in _URL.finditer(ctx.output + "\n" + err.before) if not m.group(1)] or \
        [m.group(0) for m in _URL.finditer(ctx.stdout) if not m.group(1)]  # `print(f"Downloading {url}")`
    named = _pool_urls(err.text)  # urllib3's own words for what it could not reach
    evidence = [f"{short}:{line} downloads " + (url or "(the URL is computed)" + (
        f"; the job printed {printed[-1]} before it failed" if printed else
        f"; the error names {named[-1]}" if named else ""))]
    url = url or (printed[-1] if printed else None) or (named[-1] if named else None)
    root = download_root.data_folder_option(frames, list(ctx.argv), ctx.cwd)
    if root and not guard:
        flag, value, at = root
        evidence.append(f"{at} asks for the download (download=True) into the data folder {flag} names ({value})")
        fix = (f"Fetch {url or 'the files it downloads'} where there is network and put them in the data folder "
               f"{flag} names (now {value}): {at} downloads only what is not there yet; or give {flag} a copy of "
               "the data set made elsewhere, or point HTTPS_PROXY at a proxy reachable from this machine (not "
               "tried).")
        return url, fix, evidence
    where = f"in the job's folder {ctx.cwd}" if ctx.cwd else "where the job looks"
    there = os.path.dirname(file)
    if guard and ctx.cwd and os.path.realpath(there) != os.path.realpath(ctx.cwd) and \
            all(os.path.exists(os.path.join(there, p)) for p in guard[1] if not os.path.isabs(p)):
        at, paths = guard  # the files are there, beside the script: the job was started from another folder
        evidence.append(f"{short}:{at} skips the download when {', '.join(paths)} exist; they do in {there}")
        fix = (f"Launch it from {there} (`cd {shlex.quote(there)}`): {', '.join(paths)} are there, and the job "
               f"looks for them in the folder it starts in (now {ctx.cwd}), so it downloaded instead (not tried).")
    elif guard:
        at, paths = guard
        evidence.append(f"{short}:{at} skips the download when {', '.join(paths)} exist")
        fix = (f"Fetch {url or 'the file it downloads'} where there is network and unpack it {where}, so that "
               f"{', '.join(paths)} exist: {short}:{at} then skips the download; or point HTTPS_PROXY at a proxy "
               "reachable from this machine (not tried).")
    else:
        fix = (f"Fetch {url or 'the file it downloads'} where there is network and make the job read the local "
               f"copy instead of downloading it at {short}:{line}, or point HTTPS_PROXY at a proxy reachable from "
               "this machine (not tried).")
    return url, fix, evidence


def _download_guard(tree: ast.AST, line: int, ctx: Context) -> Optional[tuple[int, list[str]]]:
    """(line, paths) of the `if` around the download that tests for files being there already."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.If) or not node.lineno < line <= (node.end_lineno or node.lineno):
            continue
        tests = [c for c in ast.walk(node.test) if isinstance(c, ast.Call) and
                 getattr(c.func, "attr", getattr(c.func, "id", "")) in ("exists", "isfile", "isdir", "is_file",
                                                                         "is_dir") and c.args]
        reading = Reading(tree, list(ctx.argv))
        paths = [v for v in (reading.value(c.args[0]) for c in tests) if v]
        if paths:
            return node.lineno, paths
    return None


# ---- collectives --------------------------------------------------------------------------------------
_TIMEOUT = ("Watchdog caught collective operation timeout", "Timed out waiting", "wait timeout after",
            "Socket Timeout", "timed out after", "ProcessGroupNCCL's watchdog")


def collective_timeout(err: PyError, ctx: Context) -> Optional[Finding]:
    """A collective (NCCL's watchdog, gloo's recv) gave up waiting for another rank."""
    text = err.text
    hit = next((m for m in _TIMEOUT if m in text), None)
    if not hit or not any(w in text for w in ("gloo", "NCCL", "nccl", "collective", "c10d", "Gloo", "store")):
        return None
    op = _re(r"OpType=(\w+)", text) or _re(r"for (\w+) operation", text)
    return Finding(causes.COLLECTIVE_TIMEOUT, "A collective timed out: a rank waited for another that never "
                   "joined " + (f"the {op} " if op else "it ") + f"(at {err.user_where}).",
                   "The rank that did not arrive is the cause: find the one that failed, stalled or took "
                   "another branch first (its own error or stack; the rank that timed out only waited). If a "
                   "rank is legitimately slow (a first-step compile, evaluation or checkpointing on rank 0 "
                   "only), make every rank take part or raise timeout= in init_process_group.",
                   [f"message: {l.strip()[:300]}" for l in text.splitlines()[:2]])


READERS: list[Callable[[PyError, Context], Optional[Finding]]] = [
    gpu_ranks_without_gpus, assert_path_missing, cuda_oom, cuda_error, shm_exhausted, fd_exhausted, disk_full, download_failed, collective_timeout,
    output_dir_missing]


def classify(err: PyError, ctx: Context) -> Optional[Finding]:
    """The first reader that recognises the exception."""
    for read in READERS:
        found = read(err, ctx)
        if found is not None:
            return found
    return None


# ---- helpers ------------------------------------------------------------------------------------------
def _re(pattern: str, text: str) -> Optional[str]:
    """The first group of the first match, or None."""
    m = re.search(pattern, text)
    return m.group(1) if m else None


def _bytes(size: str) -> float:
    """'1.5 GiB' as bytes."""
    m = re.match(r"([\d.]+) ?([KMGTP]?)i?B|(\d+) bytes", size.strip())
    if not m:
        return 0.0
    if m.group(3):
        return float(m.group(3))
    return float(m.group(1)) * 1024 ** " KMGTP".index(m.group(2) or " ")


def _option(argv: list[str], *names: str) -> Optional[str]:
    """The value of a launcher option given as `--name V` or `--name=V`."""
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                return argv[i + 1]
            if a.startswith(n + "="):
                return a.split("=", 1)[1]
    return None


def _near(text: str, marker: str) -> list[str]:
    """Lines of `text` that contain `marker` (the last few)."""
    return [l for l in text.splitlines() if marker in l][-3:]
