"""`check` on an sbatch submission, before it is submitted: what sbatch will make of it, whether its partition
can ever run it, whether its output folders and --chdir exist where it will run (seen through a short srun on
a node of that partition), and the usual checks of its training command, run on that node too."""

from __future__ import annotations

import getpass
import json
import os
import shlex
import uuid
import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional

from dfdoctor import causes
from dfdoctor.model import STATIC, CheckRecord, Result, Status, fail, ok, skip, warn
from dfdoctor.numbers import is_whole, size_words, whole
from dfdoctor.slurm import cluster, commands, jobenv, patterns, script, testonly
from dfdoctor.slurm.sbatch import Submission

NODE_CHECK_IDS = ("slurm.training", "imports.smoke", "deps.requirements", "cuda.init", "cuda.nccl",
                   "compile.race", "launch.path", "log.writable", "job.leftovers")
SRUN_IMMEDIATE_S = 10  # srun gives up when no node is free this soon, rather than queueing
NODE_CHECKS_TIMEOUT_S = 240.0


def submission(sub: Submission, asked: Optional[testonly.Asked] = None) -> list[Result]:
    """What sbatch will run, with which options and where each came from, and what sbatch itself answers to
    `--test-only` (the observed word on whether it accepts the submission, and where and when it would start)."""
    if sub.script is None and sub.wrap is None:
        return [fail("sbatch names no batch script (and no --wrap).", causes.COMMAND_NOT_FOUND,
                     fix="Give the script: `sbatch [OPTIONS] job.sbatch`.")]
    if sub.script is not None and not sub.script.is_file():
        return [fail(f"The batch script {sub.script} does not exist.", causes.COMMAND_NOT_FOUND,
                     fix="Check the path (relative to where sbatch runs).")]
    ev = [f"--{k}={v} (from {sub.origin[k]})" for k, v in sorted(sub.options.items())]
    train = script.find(sub.script_text)
    ev.append(f"training command: {train.line}" if train else "no training command found in the script")
    out: list[Result] = []
    if asked is not None and asked.refused:
        fix, cause = testonly.refusal_fix(asked, sub.script, sub.script_size)
        out.append(fail(f"sbatch refuses this submission: {asked.words or 'rc ' + str(asked.answer.rc)}", cause,
                        fix=fix, evidence=(f"$ {shlex.join(testonly.test_argv(sub.argv))}: rc {asked.answer.rc}",
                                           *ev)))
    elif asked is not None and asked.accepted:
        st = asked.start or {}
        when = "" if asked.start_unknown else f" at {st.get('at')}"
        said = (f"sbatch --test-only accepts it: job {sub.job_name!r} would start{when} on "
                f"{st.get('nodes')} in partition {st.get('partition')} ({st.get('cpus')} CPU(s))")
        # sbatch's change to the request, said on the queue path too (round 23's run f: a busy node dropped it)
        changed = f", after changing the request: {'; '.join(asked.warnings)}" if asked.warnings else ""
        shape = ("Ask for what sbatch will give (its warning names the change), so the job's shape is the one you "
                 "meant.")
        if asked.start_unknown:
            out.append(warn(f"{said}{changed}, but sbatch names no time it would start: no node can take it now, so "
                            "it would wait in the queue", fix="`sinfo -N -l` shows why the nodes cannot take it "
                            "(down, drained, reserved); submit when one can, or to another partition."
                            + (" " + shape if changed else ""), evidence=tuple(ev)))
        elif changed:
            out.append(warn(f"{said}{changed}.", fix=shape, evidence=tuple(ev)))
        else:
            out.append(ok(f"{said}.", evidence=tuple(ev)))
    else:
        why = asked.answer.said if asked is not None else "not asked"
        out.append(ok(f"sbatch will run {sub.script or '--wrap'} as job {sub.job_name!r} with "
                      f"{len(sub.options)} option(s) (sbatch --test-only could not be asked: {why}).",
                      evidence=tuple(ev)))
    if sub.ignored:
        out.append(warn(f"sbatch ignores {len(sub.ignored)} #SBATCH line(s) of the script: "
                        + "; ".join(f"line {n} `{line.strip()}` ({why})" for n, line, why in sub.ignored[:4]),
                        fix="Move the #SBATCH lines to the top of the script, before its first command and "
                            "starting in the first column (or give the options on the sbatch line).",
                        evidence=tuple(f"line {n}: {line}" for n, line, _ in sub.ignored), basis="static"))
    if sub.unknown:
        out.append(warn(f"Options dfdoctor does not understand: {' '.join(sub.unknown)}; what they change is "
                        "not checked.", evidence=tuple(sub.unknown)))
    return out


def fits(sub: Submission, asked: Optional[testonly.Asked] = None) -> list[Result]:
    """The request against the partition, read from scontrol and sinfo, explains what sbatch answered: it fails
    only when sbatch --test-only refused the request as one the cluster cannot run (an observed refusal); when
    sbatch accepts it, a static comparison never blocks it (sbatch may adjust the request: `--nodes=2
    --ntasks=1` becomes one node); when sbatch could not be asked, it only warns."""
    parts, default, problem = cluster.partitions()
    if problem:
        return [skip(f"Could not read the partitions: {problem}")]
    name = sub.get("partition") or default
    if not name:
        return [warn("No --partition and the cluster has no default partition; sbatch will refuse the job.")]
    first = name.split(",")[0]
    if first not in parts:
        return [_judged(asked, f"Partition {first!r} does not exist (partitions: {', '.join(parts)}); sbatch will refuse "
                     "the job.", causes.NEVER_STARTS, fix="Use one of the partitions `sinfo -s` lists.")]
    p = parts[first]
    nodes = sub.int_opt("nodes") or 1
    per_node_tasks = sub.int_opt("ntasks-per-node") or (max(1, (sub.int_opt("ntasks") or 1) // nodes))
    cpus = (sub.int_opt("cpus-per-task") or 1) * per_node_tasks
    mem = cluster.mem_mib(sub.get("mem") or "")
    if sub.get("mem-per-cpu") and cluster.mem_mib(sub.get("mem-per-cpu") or ""):
        mem = cluster.mem_mib(sub.get("mem-per-cpu") or "") * cpus
    gpus = _gpus_per_node(sub)
    why: list[str] = []
    if nodes > p.total_nodes or (p.limit("MaxNodes") is not None and nodes > p.limit("MaxNodes")):
        why.append(f"{nodes} node(s), the partition has {p.total_nodes} (MaxNodes "
                   f"{p.fields.get('MaxNodes', '?')})")
    if p.nodes:
        if cpus > max(n.cpus for n in p.nodes):
            why.append(f"{cpus} CPU(s) per node, its biggest node has {max(n.cpus for n in p.nodes)}")
        if mem and mem > max(n.memory_mib for n in p.nodes):
            why.append(f"{size_words(mem * 1024)} of memory per node, its biggest node has "
                       f"{size_words(max(n.memory_mib for n in p.nodes) * 1024)}")
        if gpus and gpus > max(n.gpus for n in p.nodes):
            why.append(f"{gpus} GPU(s) per node, its nodes have at most {max(n.gpus for n in p.nodes)}")
    limit = cluster.minutes(p.fields.get("MaxTime", ""))
    wanted_min = cluster.minutes(sub.get("time") or "")
    if limit is not None and wanted_min is not None and wanted_min > limit:
        why.append(f"--time {sub.get('time')}, the partition's MaxTime is {p.fields.get('MaxTime')}")
    ev = (f"partition {first}: {p.total_nodes} node(s), MaxNodes {p.fields.get('MaxNodes')}, MaxTime "
          f"{p.fields.get('MaxTime')}",) + tuple(f"node {n.name}: {n.cpus} CPUs, {n.memory_mib} MiB, {n.gpus} GPUs, "
                                                   f"{n.state}" for n in p.nodes[:8])
    if why or (asked is not None and asked.never_starts):
        why = why or [f"what sbatch refuses: {asked.words}"]
        return [_judged(asked, f"The job can never start in partition {first}: it asks for " + "; ".join(why) + ".",
                     causes.NEVER_STARTS, fix=testonly.NEVER_STARTS_FIX, evidence=ev)]
    down = [n for n in p.nodes if n.state.startswith(("down", "drain", "fail"))]
    if down and len(down) == len(p.nodes):
        return [warn(f"Every node of partition {first} is down or drained: the job will wait.", evidence=ev)]
    return [ok(f"Partition {first} can run it ({nodes} node(s), {cpus} CPU(s)/node"
               + (f", {size_words(mem * 1024)}/node" if mem else "") + (f", {gpus} GPU(s)/node" if gpus else "") + ").",
               evidence=ev)]


def _judged(asked: Optional[testonly.Asked], summary: str, cause: str, **kw) -> Result:
    """A finding of the static comparison, weighed by sbatch's own answer: a failure when sbatch refused the
    request as impossible, never a blocker when it accepted it, a warning when it could not be asked."""
    ev = tuple(kw.pop("evidence", ()))
    if asked is not None and asked.never_starts:
        return fail(summary, cause, evidence=ev + (f"sbatch --test-only: {asked.words}",), **kw)
    if asked is not None and asked.accepted:
        return ok(f"sbatch --test-only accepts the request (a reading of the partition alone would not have: "
                  f"{summary[0].lower() + summary[1:]})",
                  evidence=ev + tuple(asked.warnings))
    why = ("sbatch --test-only refused the submission for another reason" if asked is not None and asked.asked
           else "sbatch --test-only could not be asked")
    return warn(f"{summary} ({why}, so this rests on a reading of the partition)", cause, basis="static",
                evidence=ev, **kw)


def _gpus_per_node(sub: Submission) -> int:
    if sub.get("gpus-per-node"):
        return whole(sub.get("gpus-per-node").split(":")[-1], 0)
    for part in (sub.get("gres") or "").split(","):
        bits = part.split(":")
        if bits[0] == "gpu":
            return whole(bits[-1], 1)
    if sub.get("gpus"):
        n = sub.get("gpus").split(":")[-1]
        return max(1, int(n) // max(1, sub.int_opt("nodes") or 1)) if is_whole(n) else 0
    return 0


def gpus_vs_torchrun(sub: Submission) -> list[Result]:
    """GPUs per node requested against torchrun's --nproc_per_node (a static reading: at most a warning)."""
    train = script.find(sub.script_text)
    if train is None or train.nproc_per_node is None:
        return [skip("No torchrun --nproc_per_node in the script to compare with.")]
    gpus = _gpus_per_node(sub)
    nproc = train.nproc_per_node
    if not is_whole(nproc):
        return [skip(f"torchrun --nproc_per_node {nproc} is not a number dfdoctor can compare "
                     f"(it asks for {gpus} GPU(s) per node).")]
    if gpus and int(nproc) != gpus:
        return [warn(f"torchrun starts {nproc} process(es) per node but the job asks for {gpus} GPU(s) per node.",
                     fix=f"Make them equal: --nproc_per_node={gpus} (or $SLURM_GPUS_ON_NODE).",
                     evidence=(train.line,))]
    if not gpus and int(nproc) > 1:
        return [warn(f"torchrun starts {nproc} processes per node but the job asks for no GPU (--gres/--gpus).",
                     fix=f"Add --gpus-per-node={nproc} (or --gres=gpu:{nproc}).", evidence=(train.line,))]
    return [ok(f"torchrun's --nproc_per_node {nproc} matches the {gpus or 'CPU'} GPU(s) per node requested.")]


# Every srun this process starts carries this tag in its job name, so a check the runner killed at its timeout
# (SIGKILL: srun cannot release its allocation) leaves nothing the parent cannot find and cancel.
TAG = f"dfdoctor-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def cancel_leftovers() -> None:
    """Cancel what an srun of this process left in the queue (its check was killed at its timeout)."""
    for name in (f"{TAG}-check", f"{TAG}-node-check"):
        commands.run(["scancel", f"--name={name}", f"--user={getpass.getuser()}"])


def srun_prefix(sub: Submission, *, job_name: str = f"{TAG}-check") -> list[str]:
    """A short srun on one node of the submission's partition that gives up rather than queue."""
    argv = ["srun", "-N1", "-n1", f"--immediate={SRUN_IMMEDIATE_S}", "-J", job_name, "--mem=64M", "-t", "5"]
    for opt in ("partition", "account", "qos", "reservation", "constraint"):
        if sub.get(opt):
            argv.append(f"--{opt}={sub.get(opt)}")
    return argv


# Each argument is a folder (exists? writable?) or, as `f:PATH`, a file that must exist (a venv's activate).
_FOLDERS = r'''echo "node $(hostname -s)"; for d in "$@"; do case "$d" in f:*) if [ -f "${d#f:}" ]; then printf 'ok %s\n' "$d"; else printf 'missing %s\n' "$d"; fi; continue;; esac; if [ -d "$d" ]; then if [ -w "$d" ]; then printf 'ok %s\n' "$d"; else printf 'notwritable %s\n' "$d"; fi; else printf 'missing %s\n' "$d"; fi; done'''


def folders_where_it_runs(sub: Submission, cwd: Path) -> list[Result]:
    """The --output/--error folders and --chdir, tested on a node of the partition (else here, said so)."""
    workdir = sub.workdir or str(cwd)
    work_abs = workdir if workdir.startswith("/") else str(cwd / workdir)
    wanted: list[tuple[str, str, str]] = []  # (role, pattern, folder)
    out = sub.get("output") or patterns.default_output(bool(sub.get("array")))
    for role, pat in (("--output", out), ("--error", sub.get("error"))):
        if not pat:
            continue
        resolved = patterns.expand(pat, job_name=sub.job_name, array=bool(sub.get("array")))
        folder = (str(Path(resolved).parent) if patterns.literal(pat) is not None
                  else patterns.folder(resolved))
        if folder is None:
            wanted.append((role, resolved, ""))
            continue
        folder = folder if folder.startswith("/") else str(Path(work_abs) / folder)
        wanted.append((role, resolved, folder))
    steps = _steps_with_paths(sub, work_abs)
    dirs = [work_abs] + [f for _, _, f in wanted if f] + [p for _, p in steps]
    a = commands.run(srun_prefix(sub) + ["sh", "-c", _FOLDERS, "sh", *dirs], timeout=SRUN_IMMEDIATE_S + 20)
    seen: dict[str, str] = {}
    node = None
    if a.ok:
        for line in a.out.splitlines():
            state, _, path = line.partition(" ")
            if state == "node":
                node = path
            else:
                seen[path] = state
    where = f"on node {node}" if node else "on this submit host"
    note = () if node else (f"srun could not reach a node ({a.said or 'rc ' + str(a.rc)}); the compute nodes "
                            "may not share this file system",)
    if not node:
        for d in dirs:
            p = Path(d[2:] if d.startswith("f:") else d)
            seen[d] = ("ok" if p.is_file() else "missing") if d.startswith("f:") else \
                "ok" if p.is_dir() and _writable(p) else ("notwritable" if p.is_dir() else "missing")
    results: list[Result] = []
    if seen.get(work_abs) == "missing":
        mk = fail if node else warn
        results.append(mk(f"--chdir {workdir} does not exist {where}: Slurm would run the job in /tmp instead, "
                          "and its relative paths (logs, checkpoints) would go there.", causes.LOG_ELSEWHERE,
                          fix=f"mkdir -p {work_abs} (on the shared file system) or fix --chdir.",
                          evidence=note))
    for role, resolved, folder in wanted:
        if not folder:
            results.append(ok(f"{role} {resolved}: its folder depends on the job (%j/%N...), checked once it runs."))
            continue
        state = seen.get(folder)
        if state == "missing":
            mk = fail if node else warn
            results.append(mk(f"{role} {resolved}: its folder {folder} does not exist {where}; Slurm would fail "
                              "the job before it runs (ExitCode 0:53) and write nothing anywhere.",
                              causes.LOG_DIR_MISSING, fix=f"mkdir -p {folder} before submitting.", evidence=note))
        elif state == "notwritable":
            mk = fail if node else warn
            results.append(mk(f"{role} {resolved}: its folder {folder} is not writable {where}.",
                              causes.LOG_NOT_WRITABLE, fix=f"Make {folder} writable for the job's user.",
                              evidence=note))
        else:
            results.append(ok(f"{role} {resolved}: folder {folder} exists and is writable {where}.",
                              evidence=note))
    results += _missing_steps(sub, steps, seen, node, where, note)
    return results


def _steps_with_paths(sub: Submission, work_abs: str) -> list[tuple[script.Step, str]]:
    """The script's `cd`s and venv activations before its training command, each with the path to look at on
    the node (a `cd` is followed: `cd /data/x; source .venv/bin/activate` looks for /data/x/.venv/bin/activate)."""
    out, folder = [], work_abs
    for step in script.prelude(sub.script_text or ""):
        path = script.resolve(step.path, folder)
        if step.kind == "cd":
            out.append((step, path))
            folder = path
        else:
            out.append((step, "f:" + path))
    return out


def _missing_steps(sub: Submission, steps: list, seen: dict[str, str], node: Optional[str], where: str,
                   note: tuple) -> list[Result]:
    """A failure for each `cd` or `source .../activate` whose target is not on the node (a warning where no node
    was reached, or where the script goes on after it: no `set -e`)."""
    name = sub.script.name if sub.script is not None else "the batch script"
    out: list[Result] = []
    for step, path in steps:
        if seen.get(path) != "missing":
            continue
        if out and out[-1].status is Status.FAIL:
            break  # the script stopped at the step before: what follows it never runs
        mk = fail if node and step.stops else warn
        then = ("the script stops there, before its training command and before any output of it"
                if step.stops else "the script goes on without it (no `set -e`)")
        if step.kind == "cd":
            out.append(mk(f"{name} line {step.number}: cd {step.path}: no such folder {where}; {then}.",
                          causes.INPUT_MISSING, evidence=(f"{name}:{step.number}: {step.line}", *note),
                          fix=f"Create {path} where the job runs (on the file system the nodes share), or fix "
                              f"the path in {name} line {step.number}."))
        else:
            venv = str(Path(path[2:]).parent.parent)
            out.append(mk(f"{name} line {step.number}: {step.line}: no such file {where} (no virtual environment "
                          f"at {venv}); {then}, and python would not be the venv's.", causes.COMMAND_NOT_FOUND,
                          evidence=(f"{name}:{step.number}: {step.line}", *note),
                          fix=f"Create the environment where the job runs (python3 -m venv {venv} && {venv}/bin/pip "
                              f"install -r requirements.txt; not tried), or fix the path in {name} line "
                              f"{step.number}."))
    return out


def _writable(p: Path) -> bool:
    return os.access(p, os.W_OK)


def training_checks_on_node(sub: Submission, cwd: Path, env: dict[str, str],
                            skip_ids: tuple[str, ...] = ()) -> list[CheckRecord]:
    """The usual checks of the script's training command, run by dfdoctor on a node of the partition."""
    train = script.find(sub.script_text)
    if train is None:
        return [CheckRecord(id="slurm.training", phase="pre", status=Status.SKIP, title="Training command",
                            summary="No python/torchrun line found in the batch script: its checks were not run.")]
    workdir = script.folder_after(sub.script_text or "", sub.workdir or str(cwd))  # where its `cd`s lead
    if workdir != (sub.workdir or str(cwd)) and not Path(workdir).is_dir():
        # srun would start the checks in /tmp instead, and blame the script's path for the missing folder
        return [CheckRecord(id="slurm.training", phase="pre", status=Status.SKIP, title="Training command",
                            summary=f"The script changes into {workdir} before its training command, and that "
                                    "folder is not on this host: the command's checks were not run "
                                    "(slurm.output says whether it is on a node).")]
    job_env = jobenv.of(sub, env, cwd)
    check = [sys.executable, "-m", "dfdoctor", "check", "--format", "json"]
    for s in skip_ids:
        check += ["--skip", s]
    check += ["--", *train.argv]
    argv = (srun_prefix(sub, job_name=f"{TAG}-node-check") + [f"--chdir={workdir}", "--mem=2G"]
            + job_env.srun_options() + job_env.wrap(check))
    a = commands.run(argv, timeout=NODE_CHECKS_TIMEOUT_S, env=env)
    try:
        doc = json.loads(a.out[a.out.index("{"):]) if "{" in a.out else None
    except ValueError:
        doc = None
    if not doc:
        return [CheckRecord(id="slurm.training", phase="pre", status=Status.SKIP, title="Training command",
                            summary=f"The checks of `{train.line}` could not run on a node: "
                                    f"{a.said or 'no answer'}",
                            evidence=[shlex.join(argv)])]
    node = (doc.get("environment") or {}).get("host", "?")
    recs = []
    for c in doc.get("checks") or []:
        r = CheckRecord.from_dict(c)
        if train.guarded:
            r = _a_lead(r, train.line)
        r.summary = f"on {node}: {r.summary}"
        r.data = dict(r.data, node=node, job_environment=job_env.said)
        r.evidence = list(r.evidence) + [f"run with the job's environment: {job_env.said}"]
        recs.append(r)
    if job_env.problem:
        recs.append(CheckRecord(id="slurm.training", phase="pre", status=Status.WARN, title="Training command",
                                summary=f"{job_env.problem}; the node checks ran with what the job will get."))
    return recs


def _a_lead(r: CheckRecord, line: str) -> CheckRecord:
    """A finding about a training line the script runs only under a condition (`if`, a loop, `case`: an array's
    task, a file's presence): what was seen is true of that line, but the job may never run it, so it warns and
    never stops the submission."""
    if r.status != Status.FAIL:
        return r
    why = f"the script runs `{line}` only under a condition dfdoctor did not judge"
    r.findings = [replace(f, status=Status.WARN, basis=STATIC) if f.status == Status.FAIL else f for f in r.findings]
    r.status, r.basis = Status.WARN, STATIC
    r.evidence = list(r.evidence) + [why]
    return r


def ask_once(sub: Submission, cwd: Path, env: dict[str, str]) -> Optional[testonly.Asked]:
    """`sbatch --test-only` with the user's line, asked once per submission (None when there is no script)."""
    if sub.script is not None and not sub.script.is_file():
        return None
    if sub.asked is None:
        sub.asked = testonly.ask(sub.argv, cwd, env)
    return sub.asked
