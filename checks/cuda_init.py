"""cuda.init: can the training interpreter use the GPUs the launch expects, and if not, exactly why?

It runs `probes/cuda_init_probe.py` in the training interpreter (never torch in dfdoctor's process): the torch
build, the driver, the device nodes, the visibility variables, then CUDA init and a real allocation, matmul and
synchronize on every visible GPU (a CPU-only build, as its torch/version.py says, is not imported: no GPU can be
used through it). No GPU is a `skip` unless the launch needs one; a GPU that is there but
broken or hangs is always a `fail`.
"""

from __future__ import annotations

from typing import Iterator, Optional, Sequence

from dfdoctor import causes, check, fail, ok, skip, warn
from dfdoctor.launchline.commandline import as_lead
from dfdoctor.model import Result
from dfdoctor.probe import ProbeOutcome, run_probe, unreached

from .cuda_common import (
    Expectation,
    Visibility,
    expectation,
    guessed_python,
    innermost_frame,
    parse_visible,
    probe_env,
    stack_excerpt,
)

DEFAULT_TIMEOUT = 60.0
# Other processes may hold this much of a GPU before we warn (our own context takes ~0.5 GiB of it).
BUSY_MIB = 2048


@check("cuda.init", title="CUDA initialises and computes on every visible GPU", phases=("pre",),
       timeout=DEFAULT_TIMEOUT, imports_torch=True)
def cuda_init(ctx) -> Iterator[Result]:
    """Probe torch + CUDA in the training interpreter and turn what it saw into one verdict."""
    limit = float(ctx.timeout or DEFAULT_TIMEOUT)
    out = run_probe(ctx, "cuda_init_probe.py", timeout=max(1.0, limit - 1.0), env=probe_env(ctx))
    yield from as_lead(judge(ctx, expectation(ctx), out, limit), guessed_python(ctx))


def judge(ctx, exp: Expectation, out: ProbeOutcome, limit: float) -> Iterator[Result]:
    """Turn what the probe saw (or how it ended) into findings."""
    facts = out.payload or {}
    data = {"cuda": _summary_facts(facts, exp, out)}
    unreachable = unreached(ctx, out)
    if unreachable:
        yield unreachable
        return
    if out.spawn_error:
        yield _unavailable(exp, f"the training interpreter {ctx.python} could not be started: {out.spawn_error}",
                           data, cause=causes.COMMAND_NOT_FOUND, fix="pass --python with a working interpreter")
        return
    if out.timed_out:
        yield _hang(facts, out, limit, data)
        return
    if facts.get("stage") != "done":
        yield _died(facts, out, data)
        return
    if facts.get("torch") is None:
        yield from _no_torch(ctx, facts, exp, data)
        return
    vis = parse_visible(facts["env"].get("CUDA_VISIBLE_DEVICES"), _physical(facts))
    data["cuda"]["visible"] = list(vis.visible)
    if not (facts.get("available") and facts.get("device_count") and facts.get("init_ok")):
        yield _not_usable(facts, vis, exp, data)
        return
    yield from _devices(facts, vis, exp, data)


# ---- the ways it goes wrong ---------------------------------------------------------------------------

def _hang(facts: dict, out: ProbeOutcome, limit: float, data: dict) -> Result:
    """The probe was killed at its deadline: say in which stage, with the stack it printed."""
    where = facts.get("stage") or "start"
    stack = stack_excerpt(out.stderr)
    frame = innermost_frame(stack)
    evidence = (f"stage reached: {where}", *([f"stuck at {frame}"] if frame else ()), *stack)
    if where in ("start", "torch build", "import torch"):  # reading torch's files, or importing them
        return fail(f"`import torch` did not finish within {limit:.0f} s in the training interpreter",
                    causes.IMPORT_HANG, evidence=evidence, data=data,
                    details="The probe was killed before CUDA was touched; the stack shows what the import waits on.",
                    fix="look at the stack: a slow or hung file system (NFS, a fuse mount) under site-packages, or "
                        "an import-time lock; try `python -X importtime -c 'import torch'`")
    return fail(f"CUDA initialisation did not finish within {limit:.0f} s (stuck in stage '{where}')",
                causes.CUDA_INIT_HANG, evidence=evidence, data=data,
                details="dfdoctor killed the probe and everything it started; the stack shows where it waited.",
                fix="check `nvidia-smi` (a GPU in a bad state, Xid errors in `dmesg`), that the NVIDIA persistence "
                    "daemon and, on NVSwitch machines, nvidia-fabricmanager run; reset or drain the GPU if needed")


def _died(facts: dict, out: ProbeOutcome, data: dict) -> Result:
    """The probe exited without finishing, e.g. a segfault inside the CUDA driver."""
    how = f"signal {out.signal}" if out.signal else f"exit status {out.returncode}"
    tail = [l for l in out.stderr.strip().splitlines() if l.strip()][-12:]
    return fail(f"the CUDA probe died with {how} in stage '{facts.get('stage', 'start')}'", causes.CUDA_INIT_FAILED,
                evidence=tuple(tail), data=data,
                fix="run `python -c \"import torch; torch.ones(1, device='cuda')\"` in the training interpreter to "
                    "see it directly; a crash inside the driver usually means a driver/runtime mismatch")


def _no_torch(ctx, facts: dict, exp: Expectation, data: dict) -> Iterator[Result]:
    """torch cannot be imported: nothing to initialise, and why."""
    if facts.get("missing_module"):
        yield _unavailable(exp, f"torch is not installed in the training interpreter ({ctx.python})", data,
                           fix=f"{ctx.python} -m pip install torch (a CUDA build), or pass --python")
        return
    yield fail(f"`import torch` fails in the training interpreter: {facts.get('import_error')}", causes.IMPORT_ERROR,
               evidence=tuple((facts.get("import_traceback") or "").strip().splitlines()[-8:]), data=data,
               fix="fix the torch installation (a broken or half-upgraded install: pip install --force-reinstall)")


def _not_usable(facts: dict, vis: Visibility, exp: Expectation, data: dict) -> Result:
    """torch sees no usable GPU: find the precise reason, or report CUDA's own error on a present GPU."""
    reasons = unavailable_reasons(facts, vis)
    init_error = facts.get("init_error") or facts.get("available_error")
    found = bool(facts.get("available") and facts.get("device_count"))
    said = f"torch says: {init_error}" if init_error else facts.get("build_note")  # the build, read from its file
    if reasons and not found:
        evidence = tuple(reasons[1:]) + ((said,) if said else ())
        return _unavailable(exp, reasons[0], data, evidence=evidence, fix=_fix_for(reasons[0], facts, vis, reasons))
    # torch found GPUs (or nothing explains why not), yet CUDA will not start: CUDA's own error is the finding
    mismatch = driver_mismatch(facts)
    summary = f"CUDA initialisation failed: {init_error or 'torch sees no GPU although the driver lists one'}"
    if mismatch and "older than torch" not in mismatch:
        summary = f"CUDA initialisation failed: {mismatch}"
    evidence = ((f"torch says: {init_error}",) if init_error and summary.find(init_error) < 0 else ()) + \
        ((mismatch,) if mismatch and mismatch not in summary else ()) + _driver_lines(facts) + tuple(reasons)
    return fail(summary, causes.CUDA_INIT_FAILED, evidence=evidence, data=data, fix=_init_fix(init_error, mismatch))


def _devices(facts: dict, vis: Visibility, exp: Expectation, data: dict) -> Iterator[Result]:
    """CUDA is up: judge each device's allocation, matmul, architecture, and who else holds its memory."""
    devices = facts.get("devices") or []
    arch = facts["torch"].get("arch_list") or []
    broken = [d for d in devices if d.get("error") or not d.get("matmul_ok")]
    if broken:
        d = broken[0]
        what = d.get("error") or "the matmul returned a wrong answer"
        no_kernel = _arch_problem(d, arch)
        yield fail(f"GPU {d['index']} ({d.get('name')}) failed in '{d.get('failed_stage', 'matmul')}': {what}",
                   causes.CUDA_INIT_FAILED, data=data,
                   evidence=tuple(f"GPU {b['index']}: {b.get('error') or 'wrong matmul result'}" for b in broken)
                   + ((no_kernel,) if no_kernel else ()),
                   fix="install a torch build compiled for this GPU's architecture" if no_kernel else
                   "exclude the GPU with CUDA_VISIBLE_DEVICES and check it (`nvidia-smi -q`, Xid errors in dmesg)")
        return
    for d in devices:
        problem = _arch_problem(d, arch)
        if problem and problem.endswith("not at all"):
            yield fail(problem, causes.CUDA_INIT_FAILED, data=data,
                       fix="install a torch build compiled for this GPU's architecture")
            return
        if problem:  # PTX from an older architecture: it works, after a slow JIT compile at every cold start
            yield warn(problem, None, data=data, fix="install a torch build compiled for this GPU's architecture")
    busy = _busy(facts, vis, devices)
    if busy:
        yield warn(busy[0], None, evidence=tuple(busy[1:]), data=data,
                   fix="stop the other processes, or choose free GPUs with CUDA_VISIBLE_DEVICES")
    t = facts["torch"]
    names = "; ".join(f"{d['index']} {d.get('name')} ({d.get('sm')}{', bf16' if d.get('bf16') else ''}, "
                      f"{_gib(d.get('free_mib'))}/{_gib(d.get('total_mib'))} GiB free)" for d in devices)
    driver = _driver_version(facts)
    drv_cuda = (facts.get("libcuda") or {}).get("driver_cuda")
    n = len(devices)
    yield ok(f"{n} GPU{'s' if n != 1 else ''} usable: {names}; torch {t.get('version')} (CUDA {t.get('cuda')}), "
             f"driver {driver or '?'} (CUDA {drv_cuda or '?'})",
             evidence=tuple(_device_lines(devices)) + _driver_lines(facts) + _hidden_lines(vis)
             + tuple(x for x in (driver_mismatch(facts),) if x),
             data=data)


def _unavailable(exp: Expectation, reason: str, data: dict, *, evidence: tuple = (), fix: str = "",
                 cause: str = causes.CUDA_UNAVAILABLE) -> Result:
    """No usable GPU: fail when the launch needs one, warn when it hints at one, else skip; say which and why."""
    if "takes --device=cpu" in exp.reason and fix:
        fix = f"run on the CPU: add --device=cpu to the command; or {fix}"
    if exp.level in ("required", "expected"):  # a need read from the launch's text only warns (exp.basis)
        return fail(f"no usable GPU: {reason}; the launch needs one ({exp.reason})", cause,
                    evidence=evidence + (f"a GPU is needed: {exp.reason}",),
                    fix=fix, data=data, basis=exp.basis)
    if exp.level == "hinted":
        return warn(f"no usable GPU: {reason}", cause, evidence=evidence + (f"a GPU is probably wanted: {exp.reason}",),
                    fix=fix, data=data)
    return skip(f"no usable GPU ({reason}); {exp.reason}, so this is not a failure (--require-gpu makes it one)",
                evidence=evidence, data=data)


# ---- reasons ------------------------------------------------------------------------------------------

def unavailable_reasons(facts: dict, vis: Visibility) -> list[str]:
    """Every environmental reason torch sees no GPU, most fundamental first (fixing a later one alone won't help)."""
    reasons = []
    t = facts.get("torch") or {}
    if t and not t.get("cuda") and not t.get("hip"):
        reasons.append(f"torch {t.get('version')} is a CPU-only build (torch.version.cuda is None)")
    proc = facts.get("proc_driver") or {}
    lib = facts.get("libcuda") or {}
    nodes = facts.get("dev_nodes") or []
    if not proc.get("kernel_module") and not lib.get("loadable"):
        reasons.append("no NVIDIA driver: /proc/driver/nvidia is absent and libcuda.so.1 cannot be loaded")
    elif not lib.get("loadable"):
        reasons.append(f"the NVIDIA kernel driver {proc.get('kernel_module')} is loaded, but libcuda.so.1 (its "
                       f"user-space library) cannot be loaded here: {lib.get('error', '')}".rstrip(": "))
    elif proc.get("kernel_module") or lib.get("loadable"):
        gpu_nodes = [n for n in nodes if n[len("nvidia"):].isdigit()]
        if "nvidiactl" not in nodes or not gpu_nodes:
            missing = ", ".join(x for x in ("/dev/nvidiactl", "/dev/nvidia0") if x.split("/")[-1] not in nodes)
            reasons.append(f"the NVIDIA driver is installed but the device nodes are missing here ({missing}); "
                           f"present: {', '.join('/dev/' + n for n in nodes) or 'none'}")
    nvd = (facts.get("env") or {}).get("NVIDIA_VISIBLE_DEVICES")
    if nvd is not None and nvd.strip().lower() in ("", "none", "void"):
        reasons.append(f"NVIDIA_VISIBLE_DEVICES={nvd!r} told the container runtime to pass no GPU in")
    reasons.extend(vis.problems)
    if vis.hides_all and not vis.problems and vis.variable is not None:
        reasons.append(f"CUDA_VISIBLE_DEVICES={vis.variable} leaves no GPU visible")
    return reasons


def driver_mismatch(facts: dict) -> Optional[str]:
    """A driver older than the CUDA runtime torch was built with (major version), as a sentence."""
    runtime = (facts.get("torch") or {}).get("cuda")
    drv = (facts.get("libcuda") or {}).get("driver_cuda")
    if not runtime or not drv:
        return None
    try:
        rt_v = tuple(int(x) for x in runtime.split(".")[:2])
        dr_v = tuple(int(x) for x in drv.split(".")[:2])
    except ValueError:
        return None
    if dr_v[0] < rt_v[0]:
        version = f" {_driver_version(facts)}" if _driver_version(facts) else ""
        return (f"the driver{version} supports CUDA {drv}, but torch was built for CUDA {runtime}: "
                f"a CUDA {rt_v[0]}.x runtime needs a driver for CUDA {rt_v[0]}.0 or newer")
    if dr_v < rt_v:
        return (f"the driver supports CUDA {drv}, older than torch's CUDA {runtime}: it runs under minor-version "
                f"compatibility, but kernels JIT-compiled from PTX may fail")
    return None


def _fix_for(reason: str, facts: dict, vis: Visibility, reasons: Sequence[str] = ()) -> str:
    """The one action that removes the first reason (and, for a CPU-only torch on a machine without a driver, the
    machine too: a CUDA build of torch alone would find no GPU here)."""
    if "CPU-only" in reason:
        cuda = (facts.get("libcuda") or {}).get("driver_cuda")
        tag = f"cu{cuda.replace('.', '')}" if cuda else "cu126"
        if any(r.startswith("no NVIDIA driver") for r in reasons):
            return (f"run on a machine with a GPU: this one has no NVIDIA driver, so a CUDA build of torch would find "
                    f"no GPU here either; there, install one (pip install torch --index-url "
                    f"https://download.pytorch.org/whl/{tag})")
        return (f"install a CUDA build of torch matching the driver, e.g. pip install torch "
                f"--index-url https://download.pytorch.org/whl/{tag}")
    if reason.startswith("no NVIDIA driver"):
        return ("install the NVIDIA driver on the host (and its user-space libraries in the container), "
                "or run on a GPU machine")
    if "libcuda" in reason:
        return ("install the driver's user-space libraries in this environment at the host driver's exact version "
                "(in an LXC container: the same .run installer with --no-kernel-module)")
    if "device nodes" in reason:
        return ("pass the GPUs into the container: for Proxmox LXC add to /etc/pve/lxc/<vmid>.conf "
                "`lxc.cgroup2.devices.allow: c 195:* rwm`, `lxc.cgroup2.devices.allow: c 508:* rwm` and "
                "`lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file` (likewise nvidiactl, "
                "nvidia-uvm); for Docker use --gpus all")
    if "NVIDIA_VISIBLE_DEVICES" in reason:
        return "start the container with NVIDIA_VISIBLE_DEVICES=all (or the GPUs it should have)"
    phys = sorted(set(vis.visible) | set(vis.hidden))
    choices = ",".join(str(i) for i in phys) if phys else "0"
    return f"unset CUDA_VISIBLE_DEVICES, or set it to GPUs that exist (e.g. CUDA_VISIBLE_DEVICES={choices})"


def _init_fix(init_error: Optional[str], mismatch: Optional[str]) -> str:
    """What to try when CUDA is present but will not start."""
    text = (init_error or "").lower()
    if mismatch and "older than torch" not in mismatch:
        return "upgrade the NVIDIA driver, or install a torch build for the driver's CUDA version"
    if "802" in text or "system not yet initialized" in text:
        return "start nvidia-fabricmanager (systemctl start nvidia-fabricmanager) at the driver's exact version"
    if "busy or unavailable" in text or "exclusive" in text:
        return "the GPU is in exclusive-process mode and taken: stop the other process or choose another GPU"
    return "run nvidia-smi and look for Xid errors in dmesg; reload the driver or reboot the node if it is wedged"


def _arch_problem(d: dict, arch: list[str]) -> Optional[str]:
    """A sentence if torch has no machine code for this GPU's architecture."""
    sm = d.get("sm")
    if not sm or not arch or sm in arch:
        return None
    cap = int(sm[3:]) if sm[3:].isdigit() else 0
    ptx = [a for a in arch if a.startswith("compute_") and a[8:].isdigit() and int(a[8:]) <= cap]
    how = f"only through JIT from {ptx[-1]} PTX (slow first start)" if ptx else "not at all"
    return (f"GPU {d['index']} ({d.get('name')}) is {sm}, but this torch build has kernels for {' '.join(arch)}: "
            f"it runs {how}")


def _busy(facts: dict, vis: Visibility, devices: list[dict]) -> list[str]:
    """Sentences about memory other processes already hold on the GPUs the job will use."""
    lines = []
    phys = {g.get("index"): g for g in (facts.get("physical") or {}).get("gpus") or []}
    me = facts.get("pid")
    for d in devices:
        others_mib = d.get("total_mib", 0) - d.get("free_mib", 0) - 600  # our own context
        p_index = vis.visible[d["index"]] if d["index"] < len(vis.visible) else d["index"]
        procs = [p for p in (phys.get(p_index) or {}).get("processes") or [] if p.get("pid") != me]
        if others_mib > BUSY_MIB or procs:
            who = ", ".join(f"pid {p['pid']} ({p.get('used_mib') or '?'} MiB)" for p in procs) \
                or "processes not visible here"
            lines.append(f"GPU {d['index']} ({d.get('name')}): {max(others_mib, 0) / 1024:.1f} GiB already held by "
                         f"others: {who}")
    if lines:
        lines.insert(0, f"other processes already hold memory on {len(lines)} of the job's GPUs: {lines[0]}")
    return lines


# ---- facts for the report -----------------------------------------------------------------------------

def _physical(facts: dict) -> list[dict]:
    """Physical GPUs from NVML / nvidia-smi, else the driver's /proc listing."""
    gpus = (facts.get("physical") or {}).get("gpus")
    if gpus:
        return gpus
    return [{"index": i, "uuid": g.get("uuid"), "name": g.get("name")}
            for i, g in enumerate((facts.get("proc_driver") or {}).get("gpus") or [])]


def _driver_version(facts: dict) -> Optional[str]:
    """The driver's version, from NVML, nvidia-smi or /proc."""
    return (facts.get("physical") or {}).get("driver") or (facts.get("proc_driver") or {}).get("kernel_module")


def _driver_lines(facts: dict) -> tuple[str, ...]:
    """Evidence: driver, its CUDA version, device nodes."""
    lib = facts.get("libcuda") or {}
    nodes = facts.get("dev_nodes") or []
    return (f"driver {_driver_version(facts) or 'not found'}, supports CUDA {lib.get('driver_cuda') or '?'}; "
            f"device nodes: {' '.join(nodes) or 'none'}",)


def _device_lines(devices: list[dict]) -> list[str]:
    """Evidence: one line per GPU with what was measured."""
    return [f"GPU {d['index']}: {d.get('name')} {d.get('sm')}, {d.get('multiprocessors')} SMs, "
            f"context {d.get('context_s')} s, matmul+sync {d.get('matmul_s')} s, "
            f"bf16 {'yes' if d.get('bf16') else 'no'}" for d in devices]


def _gib(mib) -> str:
    """MiB as GiB with one decimal."""
    return f"{(mib or 0) / 1024:.1f}"


def _hidden_lines(vis: Visibility) -> tuple[str, ...]:
    """Evidence: GPUs the environment hides from the job."""
    if vis.variable is None or not vis.hidden:
        return ()
    return (f"CUDA_VISIBLE_DEVICES={vis.variable} hides GPU{'s' if len(vis.hidden) > 1 else ''} "
            f"{', '.join(map(str, vis.hidden))}",)


def _summary_facts(facts: dict, exp: Expectation, out: ProbeOutcome) -> dict:
    """The structured facts renderers show as a table (and scripts read from JSON)."""
    t = facts.get("torch") or {}
    return {"host": facts.get("host"), "python": facts.get("python"),
            "expectation": exp.level, "expectation_reason": exp.reason, "stage": facts.get("stage"),
            "torch": t.get("version"), "torch_cuda": t.get("cuda"), "arch_list": t.get("arch_list"),
            "available": facts.get("available"), "device_count": facts.get("device_count"),
            "driver": _driver_version(facts), "driver_cuda": (facts.get("libcuda") or {}).get("driver_cuda"),
            "dev_nodes": facts.get("dev_nodes"), "env": facts.get("env"),
            "physical": _physical(facts), "devices": facts.get("devices") or [],
            "stages": facts.get("stages"), "probe_s": round(out.duration_s, 3)}
