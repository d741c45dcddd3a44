"""What the GPU checks share: which GPUs the environment lets a job see, whether the launch expects one,
and the environment every GPU probe runs with. Pure logic on facts; nothing here imports torch."""

from __future__ import annotations

import ast

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from dfdoctor import project
from dfdoctor.launchline.commandline import guessed_interpreter, spec_for
from dfdoctor.model import OBSERVED, STATIC
from dfdoctor.lazy_re import compile_later

from .probes import _torch_build

# NVLink multicast can take a host's shared GPUs out of service for a day; every process we start keeps it off.
SAFE_GPU_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def probe_env(ctx, extra: Optional[dict[str, str]] = None) -> dict[str, str]:
    """The job's environment (with what its command line or launcher sets, e.g. `CUDA_VISIBLE_DEVICES=1
    python train.py`) plus the multicast guards and `extra`, for a GPU probe."""
    env = dict(ctx.env)
    env.update(_launch_env(ctx))
    env.update(SAFE_GPU_ENV)
    env.update(extra or {})
    return env


def cpu_only_build(payload: Optional[dict]) -> Optional[dict]:
    """The torch build a probe read in the training interpreter (`torch_build`: `_torch_build.read()`, the reading
    cuda.init's probe makes, done where the job runs), when its torch/version.py says CPU-only: no CUDA, no HIP.
    None when it says otherwise or could not be read for certain (only importing torch tells then)."""
    build = (payload or {}).get("torch_build")
    return build if isinstance(build, dict) and _torch_build.cpu_only(build) else None


def guessed_python(ctx) -> Optional[str]:
    """Why the training interpreter may not be the job's (see commandline.guessed_interpreter), or None."""
    if not ctx.command and not ctx.launcher:
        return None
    try:
        return guessed_interpreter(ctx, spec_for(ctx))
    except Exception:  # an unparsable command is another check's finding
        return None


def _launch_env(ctx) -> dict[str, str]:
    """Variables the command or its launcher assigns (`env A=1 ...`, `A=1 python`, `export A=1`)."""
    if not ctx.command and not ctx.launcher:
        return {}
    try:
        return dict(spec_for(ctx).env)
    except Exception:  # an unparsable command is another check's finding; here it just adds nothing
        return {}


@dataclass(frozen=True)
class Visibility:
    """Which physical GPUs CUDA_VISIBLE_DEVICES leaves visible, in the job's order, and what it got wrong."""

    variable: Optional[str]
    visible: tuple[int, ...]          # physical indices; device i in the job is visible[i]
    hidden: tuple[int, ...]           # physical GPUs the variable hides
    problems: tuple[str, ...] = ()    # sentences: an entry that names no GPU, a repeat, an empty value
    hides_all: bool = False
    opaque: int = 0                   # entries we cannot resolve (MIG-...), assumed visible


def parse_visible(value: Optional[str], physical: Sequence[dict]) -> Visibility:
    """Apply CUDA's rules for CUDA_VISIBLE_DEVICES to the physical GPUs (dicts with `index`, `uuid`).

    CUDA takes entries in order and stops at the first invalid one; torch treats a repeated entry as an
    empty set. `physical` may be empty when the GPUs cannot be listed: then only the value itself is judged.
    """
    indices = [int(g["index"]) for g in physical]
    if value is None:
        return Visibility(None, tuple(indices), ())
    shown = f"CUDA_VISIBLE_DEVICES={value!r}" if not value.strip() else f"CUDA_VISIBLE_DEVICES={value}"
    if not value.strip():
        return Visibility(value, (), tuple(indices), (f"{shown} is set but empty, which hides every GPU",), True)
    have = _describe(physical)
    visible: list[int] = []
    problems: list[str] = []
    opaque = 0
    for raw in value.split(","):
        entry = raw.strip()
        idx = _resolve(entry, physical)
        if idx == "opaque":
            opaque += 1
            continue
        if isinstance(idx, int) and idx < 0:
            if not visible and not opaque:
                problems.append(f"{shown} starts with a negative index, which hides every GPU")
            break
        if idx is None:
            what = "matches no GPU's UUID" if entry.upper().startswith("GPU-") else "is not a GPU index or UUID"
            if re.fullmatch(r"\d+", entry):
                what = "names a GPU that does not exist"
            problems.append(f"{shown}: entry {entry!r} {what} ({have}); CUDA ignores it and every entry after it")
            break
        if idx == "ambiguous":
            problems.append(f"{shown}: entry {entry!r} is a UUID prefix that matches several GPUs; CUDA stops there")
            break
        if idx in visible:
            problems.append(f"{shown} names GPU {idx} twice, and torch then sees no GPU at all")
            visible = []
            opaque = 0
            break
        visible.append(idx)
    hidden = tuple(i for i in indices if i not in visible)
    return Visibility(value, tuple(visible), hidden, tuple(problems), hides_all=not visible and not opaque)


def _resolve(entry: str, physical: Sequence[dict]):
    """One entry → a physical index, None (names nothing), 'ambiguous', 'opaque' or a negative number."""
    if re.fullmatch(r"-?\d+", entry):
        n = int(entry)
        if n < 0:
            return n
        if physical and n not in {int(g["index"]) for g in physical}:
            return None
        return n
    if entry.upper().startswith("MIG-"):
        return "opaque"
    if entry.upper().startswith("GPU-"):
        if not physical:
            return "opaque"
        hits = [int(g["index"]) for g in physical if str(g.get("uuid") or "").upper().startswith(entry.upper())]
        if len(hits) > 1:
            return "ambiguous"
        return hits[0] if hits else None
    return None


def _describe(physical: Sequence[dict]) -> str:
    """'this machine has 2 GPUs: 0, 1' — the facts a user needs to correct the variable."""
    if not physical:
        return "the GPUs could not be listed"
    n = len(physical)
    ids = ", ".join(f"{g['index']} ({g.get('uuid') or '?'})" for g in physical)
    return f"this machine has {n} GPU{'s' if n != 1 else ''}: {ids}"


# ---- does the launch expect a GPU? ---------------------------------------------------------------------

@dataclass(frozen=True)
class Expectation:
    """How sure we are the launch needs a GPU: 'required' (--require-gpu), 'expected' (the command says so),
    'hinted' (the script or launcher suggests it), or None; `reason` says why, for the user."""

    level: Optional[str]
    reason: str = ""
    nproc: Optional[int] = None  # GPUs per node the launcher asks for (torchrun --nproc_per_node N)
    signals: tuple[str, ...] = field(default=())
    stated: bool = False  # the user said so (--require-gpu, the config); else it is a reading of the launch's text

    @property
    def basis(self) -> str:
        """What a finding that rests on this expectation rests on: a statement counts as observed, a reading
        of the command, launcher or script (`names cuda`) is static and may only warn."""
        return OBSERVED if self.stated or self.level == "required" else STATIC


_STRONG = [
    (compile_later(r"(?<![\w.])cuda(:\d+)?(?![\w.])", re.I), "names cuda"),
    (compile_later(r"(?<![\w-])nccl(?!\w)", re.I), "names the nccl backend"),
    (compile_later(r"--nproc[-_]per[-_]node[= ]+gpu\b"), "asks torchrun for one process per GPU"),
    (compile_later(r"--(num[-_])?gpus\b"), "passes a GPU count"),
    (compile_later(r"\bCUDA_VISIBLE_DEVICES=(?!['\"]?(\s|$|['\"]))"), "sets CUDA_VISIBLE_DEVICES"),
]
_WEAK = [
    (compile_later(r"\b(torchrun|torch\.distributed\.(run|launch))\b"), "runs torchrun"),
    (compile_later(r"\bdeepspeed\b"), "runs deepspeed"),
    (compile_later(r"\baccelerate\s+launch\b"), "runs accelerate launch"),
]
_SCRIPT_CUDA = compile_later(r"""\.cuda\(|["']cuda(:\d+)?["']|device\s*=\s*["']cuda""")
_SCRIPT_FALLBACK = compile_later(r"cuda\.is_available\(")
_NPROC = compile_later(r"--nproc[-_]per[-_]node[= ]+(\d+)")
# A switch that turns the GPU off (`--no-cuda`, `--disable_cuda`, `--without-gpu`) asks for no GPU: it is taken out
# before the command is read (pytorch/examples' gat lists `--no-cuda` in its README; it is no request for CUDA).
_NEGATED = compile_later(r"--(?:no|disable|without)[-_][\w-]*")


def expectation(ctx, check_id: str = "cuda.init") -> Expectation:
    """Decide whether the launch needs a GPU, from --require-gpu, config, the command, launcher and script."""
    if ctx.require_gpu:
        return Expectation("required", "--require-gpu was given", _nproc(ctx), stated=True)
    configured = ctx.option(check_id, "expect_gpu")
    if configured is not None:
        level = "expected" if configured else None
        return Expectation(level, f"the config sets expect_gpu = {str(bool(configured)).lower()}", _nproc(ctx),
                           stated=True)
    texts = [("the command", " ".join(ctx.command))]
    if ctx.shell_command:
        texts.append(("the shell command", ctx.shell_command))
    launcher = _read(ctx.abspath(ctx.launcher)) if ctx.launcher else ""
    if launcher:
        texts.append((f"the launcher {ctx.launcher}", launcher))
    script = _script(ctx)
    for rules, level in ((_STRONG, "expected"), (_WEAK, "hinted")):
        for where, text in texts:
            for rx, what in rules:
                m = rx.search(_NEGATED.sub(" ", text))
                if m and level == "hinted" and _cpu_ranks(ctx, script):
                    return Expectation(None, f"{where} {what}, but {_cpu_ranks(ctx, script)}", _nproc(ctx))
                if m:
                    return Expectation(level, f"{where} {what} ({m.group(0).strip()!r})", _nproc(ctx))
    if script is not None:
        source = _read(script)
        default = _default_device(source, ctx.command)
        if default:
            option = _device_option(ctx, script)
            return Expectation("expected", f"{script.name}:{default[0]} sets device = {default[1]!r} and the command "
                               "does not override it" + (f" (this script takes {option.spelled('cpu')})"
                                                         if option is not None else ""), _nproc(ctx))
        chosen = _device_chosen(ctx)
        if chosen is not None and not chosen[1].lower().startswith("cuda"):
            # makemore's `--device` defaults to 'cpu': its `if args.device.startswith('cuda')` is no use of CUDA
            return Expectation(None, f"{script.name}'s {chosen[0].flag} is {chosen[1]!r} here (its "
                               f"{'value' if chosen[2] else 'default'}): CUDA only where it is asked for", _nproc(ctx))
        m = _SCRIPT_CUDA.search(source)
        if m and not _SCRIPT_FALLBACK.search(source):
            return Expectation("hinted", f"{script.name} uses CUDA ({m.group(0)!r}) with no CPU fallback", _nproc(ctx))
    return Expectation(None, "nothing in the launch asks for a GPU", _nproc(ctx))


def _cpu_ranks(ctx, script: Optional[Path]) -> str:
    """Why a distributed launcher's ranks need no GPU ('' unless plain): the script asks for the gloo backend
    whatever the machine and names no CUDA, so torchrun is no hint of one and no CUDA advice is owed."""
    if script is None:
        return ""
    # start-up: as in cuda_nccl (see the note at its imports)
    from dfdoctor.diagnose.pg_backend import read_backend, uses_nccl
    reading = read_backend(ctx.command, ctx.cwd)
    if reading is None or uses_nccl(reading.with_gpu) or uses_nccl(reading.without_gpu):
        return ""
    if _SCRIPT_CUDA.search(_read(script)):
        return ""
    return f"its ranks use the {reading.with_gpu} backend ({reading.why}) and {script.name} names no CUDA"


def _device_option(ctx, script: Path):
    """The script's own device option (`--device`, a configurator's `device`), read by the project model; None
    when it has none (a word `--device` elsewhere in its text is not an option)."""
    try:
        return project.read(ctx.command, ctx.cwd, script=str(script)).option("device")
    except (OSError, RecursionError, ValueError):
        return None


def _device_chosen(ctx) -> Optional[tuple[Any, str, bool]]:
    """(the script's device option, the value this command gives it or else its default, whether given); None
    when the script has no such option or its value is not text."""
    try:
        proj = project.read(ctx.command, ctx.cwd)
    except (OSError, RecursionError, ValueError):
        return None
    option = proj.option("device")
    given = proj.given(option) if option is not None else None
    value = given if given is not None else option.default if option is not None else None
    return (option, value, given is not None) if isinstance(value, str) and value else None


def _default_device(source: str, command: list[str]) -> Optional[tuple[int, str]]:
    """(line, value) of the script's module-level `device = 'cuda...'` default, when the command passes no
    --device of its own (nanoGPT's train.py:72, overridden by --device=cpu)."""
    if any(a == "--device" or a.startswith("--device=") for a in command):
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "device" for t in node.targets):
            value = node.value.value if isinstance(node.value, ast.Constant) else None
            if isinstance(value, str) and value.startswith("cuda"):
                return node.lineno, value
            return None  # the first default is not CUDA (or is computed): not this reading
    return None


def _nproc(ctx) -> Optional[int]:
    """The per-node process count a torchrun-style launch asks for, if it names a number."""
    for text in (" ".join(ctx.command), ctx.shell_command or ""):
        m = _NPROC.search(text)
        if m:
            return int(m.group(1))
    return None


def _script(ctx) -> Optional[Path]:
    """The Python file the command runs (python [opts] FILE.py ...), if any."""
    for tok in ctx.command:
        if tok.endswith(".py"):
            path = ctx.abspath(tok)
            return path if path.is_file() else None
    if ctx.shell_command:
        try:
            toks = shlex.split(ctx.shell_command)
        except ValueError:
            toks = ctx.shell_command.split()
        for tok in toks:
            if tok.endswith(".py") and ctx.abspath(tok).is_file():
                return ctx.abspath(tok)
    return None


def _read(path: Path, limit: int = 1 << 20) -> str:
    """At most `limit` bytes of a text file; '' when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def stack_excerpt(stderr: str, max_lines: int = 40) -> list[str]:
    """The thread stacks faulthandler printed at the deadline, main thread first, trimmed for evidence."""
    lines = stderr.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith(("Current thread", "Thread 0x"))), None)
    if start is None:
        return [l for l in lines[-max_lines:] if l.strip()]
    blocks: list[list[str]] = []
    for l in lines[start:]:
        if l.startswith(("Current thread", "Thread 0x")):
            blocks.append([l])
        elif blocks and l.strip():
            blocks[-1].append(l)
    # the main thread (its stack ends in <module>) is where a probe does its work: show it first
    blocks.sort(key=lambda b: 0 if any("in <module>" in l for l in b) else 1)
    out = [l for b in blocks for l in b]
    return out[:max_lines]


def innermost_frame(stack: list[str]) -> Optional[str]:
    """The first 'File ..., line N in f' of the main stack: where it was stuck."""
    for l in stack:
        s = l.strip()
        if s.startswith("File "):
            return s
    return None
