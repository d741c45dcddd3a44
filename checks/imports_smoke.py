"""imports.smoke: would the job get past its imports?

It finds what the launch runs (script, `-m` module, `-c` code, through torchrun, accelerate or a shell
launcher), compiles it and every local module it imports, then imports what its module level imports in a
fresh subprocess of the training interpreter with the job's cwd, environment and sys.path, never running
the main body. What it can conclude: the command is not there (`command-not-found`), a file does not compile
(`syntax-error`), a module is not installed (`missing-module`), an import raises (`import-error`), or an
import never returns (`import-hang`, with every thread's stack).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence

from dfdoctor import STATIC, Result, Status, causes, check, error, fail, ok, skip, warn
from dfdoctor.launchline.commandline import LaunchSpec, as_lead, guessed_interpreter, spec_for
from dfdoctor.probe import ProbeOutcome, run_probe, unreached
from dfdoctor.torch_use import imports_torch

# What reads a failed import (the project model's gates and typos, the corpus of known failures, the traceback
# parser, the user's own terms) is imported by the function that reads one: every `check` imports this module
# before its workers fork, and a job whose imports load needs none of it (31 M of a `check`'s 600 M instructions,
# callgrind, round 25).
if TYPE_CHECKING:
    from dfdoctor.diagnose.rules_runtime import Finding
    from dfdoctor.project.gates import Gate

DEFAULT_TIMEOUT = 90.0  # importing torch on a cold, busy machine can take tens of seconds
HANG_MARGIN_S = 3.0  # the child dumps its stacks this long before the check's own deadline
MAX_FAILURES_SHOWN = 5
MARK = "[dfdoctor-import]"
_RUNNER_MODULES = {"torchrun": "torch.distributed.run", "accelerate": "accelerate.commands.launch"}
# What a single worker of torchrun/accelerate finds in its environment (only set where the job has none).
_WORKER_ENV = {"RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "dfdoctor-smoke"}


@check("imports.smoke", title="The script compiles and its imports load", phases=("pre",), timeout=DEFAULT_TIMEOUT,
       imports_torch=True)
def imports_smoke(ctx) -> Iterator[Result]:
    """Compile the job's script and import its imports in the training interpreter."""
    if not ctx.command and not ctx.launcher:
        yield skip("no command given (dfdoctor check -- python train.py), so there is no script to try")
        return
    spec = spec_for(ctx)
    remote = not ctx.target.runs_here
    if not spec.exists and remote and spec.script is None and spec.module is None and spec.code is None:
        yield skip(f"the launch cannot be followed from here ({spec.problem}); on a remote target the launcher "
                   "lives there: launch.path analyses it", data={"launch": _spec_data(spec)})
        return
    if spec.unknown and (not spec.exists or (spec.script is None and spec.module is None and spec.code is None)):
        yield _unresolved(spec)
        return
    if not spec.exists and not remote:  # a fully resolved path that is not there: an observation
        yield fail(f"the launch command cannot start: {spec.problem}", causes.COMMAND_NOT_FOUND,
                   evidence=(f"command: {shlex.join(spec.argv)}",) + ((f"launcher line: {spec.line}",) if spec.line else ()),
                   fix=_not_found_fix(spec, local=True), data={"launch": _spec_data(spec)})
        return
    if not spec.is_python:
        yield skip(f"{spec.argv[0] if spec.argv else 'the command'} is not a Python command dfdoctor can follow",
                   data={"launch": _spec_data(spec)})
        return
    if spec.script is None and spec.module is None and spec.code is None:
        yield skip("the command starts Python without a script, module or code (an interactive interpreter)")
        return
    budget = float(ctx.timeout or DEFAULT_TIMEOUT)
    hang_s = max(1.0, budget - HANG_MARGIN_S)
    cwd = spec.cwd or ctx.cwd
    if not Path(cwd).is_dir():  # a folder the launcher creates itself (`mkdir -p x && cd x`): not there yet
        cwd = spec.script.parent if spec.script is not None and spec.script.parent.is_dir() else ctx.cwd
    request = _probe_request(spec, cwd, hang_s)
    env = {**ctx.env, **spec.env}
    if spec.runner in _RUNNER_MODULES:
        # torchrun/accelerate give every worker these; module-level code often reads them
        for k, v in _WORKER_ENV.items():
            env.setdefault(k, v)
    preload = ("torch",) if not remote and imports_torch(spec, Path(cwd)) else ()  # imported once, served
    outcome = run_probe(ctx, "import_probe.py", request=request, timeout=hang_s + 1.5, env=env, cwd=cwd,
                        preload=preload)
    guessed = guessed_interpreter(ctx, spec)
    for r in _conclude(ctx, spec, outcome, hang_s, request):
        if guessed and r.status == Status.FAIL and r.cause != causes.IMPORT_HANG:
            r = next(as_lead([r], guessed))  # seen in an interpreter that may not be the job's: a lead
        yield r


def _unresolved(spec: LaunchSpec) -> Result:
    """The script (or what runs it) depends on words that cannot be resolved without running the launcher."""
    where = f" (reading {spec.launcher.name} without running it)" if spec.launcher else ""
    return warn(f"could not resolve {spec.unknown[0]}{where}; the script's imports were not tried",
                evidence=tuple(spec.unknown) + ((f"launcher line: {spec.line}",) if spec.line else ()),
                details="\n".join(spec.notes),
                fix="Nothing is wrong that dfdoctor saw: it only cannot follow this part of the launcher. "
                    "`dfdoctor launch` runs it and watches what happens; to check the imports first, run "
                    "`dfdoctor check -- python SCRIPT` with the script's real path (and --python for the job's "
                    "interpreter).", data={"launch": _spec_data(spec)}, basis=STATIC)


def _probe_request(spec: LaunchSpec, cwd: Path, hang_s: float) -> dict[str, Any]:
    """What the probe needs to set up the import state the real launch would have."""
    if spec.script is not None:
        argv = [str(spec.script), *spec.script_args]
    else:
        argv = ["-m" if spec.module else "-c", *spec.script_args]
    pre = [_RUNNER_MODULES[spec.runner]] if spec.runner in _RUNNER_MODULES else []
    return {"script": str(spec.script) if spec.script else None, "module": spec.module, "code": spec.code,
            "path0": None, "argv": argv, "hang_s": hang_s, "pre_imports": pre}


def _conclude(ctx, spec: LaunchSpec, out: ProbeOutcome, hang_s: float, request: dict) -> Iterator[Result]:
    """Turn the probe's answer (or its silence) into findings."""
    launch = {"launch": _spec_data(spec), "python": ctx.python}
    unreachable = unreached(ctx, out)
    if unreachable:
        yield unreachable
        return
    if out.spawn_error:
        yield fail(f"the training interpreter {ctx.python} cannot be started: {out.spawn_error}",
                   causes.COMMAND_NOT_FOUND, data=launch,
                   fix="Install that Python or point --python at the interpreter the job uses.")
        return
    p = out.payload
    if p is None:
        yield _no_answer(ctx, spec, out, hang_s, launch)
        return
    if p.get("not_found"):
        looked = "" if str(p["not_found"]).startswith("/") else \
            f" (looked for it in {p.get('cwd') or ctx.cwd}" + ("" if ctx.target.runs_here else
                                                             f" on {ctx.target.describe()}") + ")"
        yield fail(f"the launch command cannot start: script not found: {p['not_found']}{looked}",
                   causes.COMMAND_NOT_FOUND,
                   evidence=(f"command: {shlex.join(spec.argv)}",), fix=_not_found_fix(spec), data=launch)
        return
    request = {**request, "path0": p.get("path0") or str(ctx.cwd)}
    where = spec.describe()
    if p["syntax_errors"]:
        yield _syntax_error(p["syntax_errors"], launch)
        return
    refused = [i for i in p["imports"] if i["status"] == "refused"]
    yield from (_refused(ctx, item, launch) for item in refused[:MAX_FAILURES_SHOWN])
    failures = [i for i in p["imports"] if i["status"] not in ("ok", "refused")]
    required = [i for i in failures if i["kind"] == "required"]
    for item, *same in _by_missing_module(required)[:MAX_FAILURES_SHOWN]:
        yield _failed_import(ctx, item, request, launch, same)
    guards = p.get("guards") or {}
    conditional = [i for i in failures if i["kind"] == "conditional"]
    for group in _by_missing_module(conditional)[:MAX_FAILURES_SHOWN]:
        yield _one_per_module(group, lambda item, also="": _conditional(
            ctx, spec, item, guards.get(str(item.get("line"))), launch, also))
    for group in _by_missing_module(p.get("lazy_missing") or [])[:MAX_FAILURES_SHOWN]:
        yield _one_per_module(group, lambda item, also="": _lazy(ctx, spec, item, request, launch, also))
    if required:
        return
    loaded = [i for i in p["imports"] if i["status"] == "ok"]
    slow = [i for i in sorted(loaded, key=lambda i: -i["seconds"]) if i["seconds"] >= 0.5][:3]
    total = sum(i["seconds"] for i in p["imports"])
    optional = [i for i in failures if i["kind"] == "optional"]
    details = "\n".join([f"python {p['python']} ({p['executable']})",
                         f"compiled {len(p['compiled'])} file(s): " + ", ".join(_short(f, ctx.cwd) for f in p["compiled"][:20])]
                        + [f"slow import: {i['name']} {i['seconds']:.2f} s" for i in slow]
                        + [f"optional import not available (the script handles it): {i['name']} at {_loc(i)}"
                           for i in optional] + p.get("notes", []))
    summary = (f"{where} compiles and its {len(loaded)} module-level import(s) load in {total:.1f} s"
               if p["compiled"] else f"{where} exists (not Python source, so its imports were not tried)")
    yield ok(summary,
             details=details, data={**launch, "imports": [{k: i[k] for k in ("name", "kind", "status", "seconds")}
                                                        for i in p["imports"]]})


def _one_per_module(group: list[dict], judge: Callable[..., Result]) -> Result:
    """One warning for the conditional or lazy imports of one missing module (`group`, in the order the job
    meets them; a failure other than a missing module is a group of one), naming every line: the words are those
    of the first line the job reaches (its branch is taken, or may be), else of the first line, and the other
    lines follow its `file:line` (` (also lines 9 and 12)`), each an evidence line, all in `data.imported_at`."""
    if len(group) == 1:
        return judge(group[0])
    lead = next((i for i in group if not judge(i).data.get("not_reached")), group[0])
    mod = lead.get("missing") or lead["name"]
    lines, also = _other_lines(lead, [i for i in group if i is not lead], mod)
    r = judge(lead, _also_at(lead, lines))
    return replace(r, evidence=tuple(r.evidence) + tuple(also),
                   data={**r.data, "imported_at": [_loc(i) for i in (lead, *lines)]})


def _conditional(ctx, spec: LaunchSpec, item: dict, guard: Optional[str], launch: dict, also: str = "") -> Result:
    """An import under an `if` that fails. Where the `if` reads an option of the script the launch does not give,
    and its branch is not taken here (judged by the probe, or on the options' defaults), this launch never gets
    there: said, with the option that would take it there, and its install is no next step (nanoGPT's `import
    wandb` under `if wandb_log`: `next: pip install wandb` for a run that logs nowhere)."""
    under = f" under {guard}" if guard else ""
    said = (f"conditional import of {item['name']} fails ({item['exception']}: {item['message']}) at "
            f"{_loc(item)}{also}{under}")
    cause = causes.MISSING_MODULE if item["status"] == "missing" else causes.IMPORT_ERROR
    fix = _missing_fix(ctx, item) if item["status"] == "missing" else ""
    evidence = (f"{_loc(item)}: {item['text']}",)
    gate, given, by_default = _gate(ctx, spec, item)
    if gate is None or given or (guard is None and by_default is not False):
        if gate is not None:
            said += f"; {_short(item['file'], ctx.cwd)} imports it {gate.words()}" + \
                (f", and this launch gives {gate.option.flag}" if given else "")
        return warn(f"{said}; the job breaks if that branch runs", cause, evidence=evidence,
                    details=item.get("traceback", ""), fix=fix, data=launch)
    said = f"conditional import of {item['name']} fails ({item['exception']}: {item['message']}) at {_loc(item)}{also}"
    return warn(f"{said}: {_short(item['file'], ctx.cwd)} imports it {gate.words()}; this launch does not give "
                f"{gate.option.flag}, so it does not get there", cause, evidence=evidence,
                details=item.get("traceback", ""), fix=_later(gate, fix), data={**launch, "not_reached": True})


def _lazy(ctx, spec: LaunchSpec, item: dict, request: dict, launch: dict, also: str = "") -> Result:
    """A module imported inside a function that is not installed: the job fails when it calls the function,
    unless every call of it sits under an `if` on an option this launch does not give, false on its default
    (nanoGPT's transformers, in GPT.from_pretrained, called only for `--init_from=gpt2*`). An import under an `if`
    inside the function is one too, said with its `if`: not reached where that `if` (or one above a call) reads
    an option this launch does not give, else the job fails if that branch runs."""
    fix = _missing_fix(ctx, item, request)
    said = f"No module named '{item['missing']}', imported inside a function at {_loc(item)}{also}"
    evidence = (f"{_loc(item)}: {item['text']}",)
    gate, given, by_default = _gate(ctx, spec, item)
    if item.get("under"):
        return _lazy_under_if(said, item["under"], gate, given, by_default, evidence, fix, launch)
    if gate is None or given or by_default is not False:
        return warn(f"{said}: the job fails when it gets there", causes.MISSING_MODULE, evidence=evidence, fix=fix,
                    data=launch)
    return warn(f"{said}, which the job reaches {gate.words()}: this launch does not give {gate.option.flag}, so it "
                "does not get there", causes.MISSING_MODULE, evidence=evidence, fix=_later(gate, fix),
                data={**launch, "not_reached": True})


def _lazy_under_if(said: str, under: dict, gate: Optional[Gate], given: bool, by_default: Optional[bool],
                   evidence: tuple, fix: str, launch: dict) -> Result:
    """A missing module imported under an `if` inside a function: the `if` named, and whether this launch gets
    there where an option decides it (the `if` itself, or one above a call of the function); else it may."""
    if gate is None or gate.via:  # the `if` says nothing of the launch, or a gate above a call does
        said += f" under `{under['text'].rstrip(':')}` (line {under['line']})"
    if gate is not None and not given and by_default is False:
        return warn(f"{said}, which the job reaches {gate.words()}: this launch does not give {gate.option.flag}, "
                    "so it does not get there", causes.MISSING_MODULE, evidence=evidence, fix=_later(gate, fix),
                    data={**launch, "not_reached": True})
    if gate is not None and given:
        return warn(f"{said}, which the job reaches {gate.words()}, and this launch gives {gate.option.flag}: the "
                    "job fails when it gets there", causes.MISSING_MODULE, evidence=evidence, fix=fix, data=launch)
    if gate is not None and by_default:
        return warn(f"{said}, which the job reaches {gate.words()}, as this launch does (its default): the job "
                    "fails when it gets there", causes.MISSING_MODULE, evidence=evidence, fix=fix, data=launch)
    return warn(f"{said}: the job fails if that branch runs", causes.MISSING_MODULE, evidence=evidence, fix=fix,
                data=launch)


def _gate(ctx, spec: LaunchSpec, item: dict) -> tuple[Optional[Gate], bool, Optional[bool]]:
    """The `if` on an option of the script that the import sits under (or a call of its function does), whether
    the command gives that option, and whether the `if`'s test holds on the options' defaults (None: not told);
    (None, False, None) where none is found or the files live elsewhere."""
    from dfdoctor.project.gates import gate_of, gate_project, holds_by_default  # start-up: see the imports
    if not ctx.target.runs_here or spec.script is None or not item.get("file") or not item.get("line"):
        return None, False, None
    proj = gate_project(ctx, spec)
    gate = gate_of(proj, item["file"], int(item["line"]))
    if gate is None:
        return None, False, None
    return gate, bool(proj.words_of(gate.option)), holds_by_default(gate, proj)


def _later(gate: Gate, fix: str) -> str:
    """The fix of an import this launch does not reach: nothing now; the install before the option is given."""
    before = f"Nothing to install for this launch. Before you give {gate.turned_on()}: "
    return before + fix if fix else before.rstrip(": ") + ", fix this import."


def _refused(ctx, item: dict, launch: dict) -> Result:
    """An import whose module-level code writes a file (the last run's log, a folder of the project): the probe
    stopped it there, since a check writes none of the user's files, so that import was not judged. Never a
    failure: the job itself may write there."""
    w = item.get("where") or {}
    at = f" at {_short(w['file'], ctx.cwd)}:{w['line']} (`{w['text']}`)" if w.get("file") else ""
    return warn(f"import of {item['name']} writes {item['refused']}{at}: a check writes none of your files, so it "
                "was stopped there and what it imports after that line was not tried", None,
                evidence=(f"{_loc(item)}: {item['text']}",), details=item.get("traceback", ""),
                fix="Nothing to fix for the check; `dfdoctor launch` runs it for real. Writing at import time "
                    "(a log opened with filemode='w', a folder emptied) also runs in every process that "
                    "imports the module: moving it under `if __name__ == \"__main__\":` keeps it to the job.",
                data=launch, basis=STATIC)


def _no_answer(ctx, spec: LaunchSpec, out: ProbeOutcome, hang_s: float, launch: dict) -> Result:
    """The probe wrote nothing: it hung (stacks in stderr), died from a signal, or could not run at all."""
    current = _current_import(out.stderr)
    stacks = _stacks(out.stderr)
    if out.timed_out or "Timeout (" in out.stderr:
        what = f"import of {current[0]}" + (f" ({current[1]})" if current[1] else "") if current else "the imports"
        return fail(f"{what} did not finish within {hang_s:.0f} s: the job would sit there with no log",
                    causes.IMPORT_HANG, details=_readable(stacks), evidence=tuple(_innermost_frames(stacks)),
                    fix="The stacks show where the main thread waits: a lock, a network call (a hub download, a "
                        "license server), a distributed rendezvous or a CUDA init at import time. Move that work "
                        "out of module level, or raise the limit with --timeout if the import is only slow.",
                    data={**launch, "hang_s": hang_s, "import": current[0] if current else None})
    if out.signal:
        name = current[0] if current else "the script's imports"
        return fail(f"importing {name} killed the interpreter with {out.signal}", causes.IMPORT_ERROR,
                    details=_readable(_tail(out.stderr, 60)), evidence=tuple(_innermost_frames(stacks)),
                    fix="A compiled extension crashed on import: reinstall it for this Python/torch/CUDA "
                        "combination (its wheel must match the installed torch).", data=launch)
    if current and out.returncode is not None:
        # an import called os._exit (or exec'd something else): the job would end right there, with no log
        rc = out.returncode
        return fail(f"importing {current[0]} ended the interpreter with exit status {rc} and no exception",
                    causes.EXITED_EARLY if rc == 0 else causes.IMPORT_ERROR,
                    evidence=(f"{current[1]}: import {current[0]}",) if current[1] else (),
                    details=_readable(_tail(out.stderr, 40)),
                    fix="Something at module level calls os._exit() or exec*(): find it in that module (or the "
                        "modules it imports) and move it under `if __name__ == \"__main__\":`.", data=launch)
    return error(f"the import probe could not run in {ctx.python} (exit status {out.returncode})",
                 details=_tail(out.stderr, 40),
                 fix="dfdoctor's probes need Python 3.6 or newer in the training interpreter.", data=launch)


def _syntax_error(errs: list[dict], launch: dict) -> Result:
    """A fail naming file:line with the offending line and a caret under the error."""
    first = errs[0]
    text = first.get("text") or ""
    ev = [f"{first['file']}:{first['line']}: {first['msg']}"]
    if text:
        ev.append("    " + text.rstrip())
        if first.get("offset"):
            start = max(0, int(first["offset"]) - 1)
            width = max(1, int(first.get("end_offset") or 0) - int(first["offset"])) if first.get("end_offset") else 1
            if first.get("end_offset") and int(first["end_offset"]) <= start + 1:
                width = 1
            ev.append("    " + " " * start + "^" * width)
    ev += [f"also: {e['file']}:{e['line']}: {e['msg']}" for e in errs[1:MAX_FAILURES_SHOWN]]
    return fail(f"{first['file']}:{first['line']} does not compile: {first['msg']}", causes.SYNTAX_ERROR,
                evidence=tuple(ev),
                fix=f"Fix the syntax at {first['file']} line {first['line']} (the caret marks where Python stopped)"
                    + (f"; check it with: python -m py_compile {shlex.quote(first['file'])}"
                       if not first["file"].startswith("<") else ""),
                data={**launch, "syntax_errors": errs})


def _by_missing_module(required: list[dict]) -> list[list[dict]]:
    """The failed imports, those of one missing module together (`import torch`, `import torch.nn`, `from torch
    import optim`: one module to install, said once with every line), in the order the job meets them; any other
    failure on its own. A lazy import (one inside a function) has no status: it is found only when missing."""
    groups: dict[object, list[dict]] = {}
    for n, item in enumerate(required):
        key = ("missing", item.get("missing") or item["name"]) if item.get("status", "missing") == "missing" else n
        groups.setdefault(key, []).append(item)
    return list(groups.values())


def _failed_import(ctx, item: dict, request: dict, launch: dict, same: Sequence[dict] = ()) -> Result:
    """One required import that fails: missing-module (with the other lines that import the same missing
    module, `same`), syntax-error in an imported module, or import-error."""
    from dfdoctor.project import typos  # start-up: see the note at the imports
    ev = [_said_at(item)]
    w = item.get("where")
    if w and (w["file"], w["line"]) != (item.get("file"), item.get("line")):
        ev.append(f"raised at {w['file']}:{w['line']}: {w['text']}")
    data = {**launch, "import": item["name"], "missing": item.get("missing")}
    if item["status"] == "missing":
        mod = item.get("missing") or item["name"]
        lines, also = _other_lines(item, same, mod)
        ev += also
        data["imported_at"] = [_loc(i) for i in (item, *lines)]
        own = _own_module_at_run_time(ctx, mod, request, item, ev, data)
        if own is not None:
            return own
        via = "" if _related(mod, item["name"]) else f" (needed by {item['name']})"
        mean = typos.module_question(mod, item.get("near"), _install(ctx)) \
            if _typed(item) and not _declared(ctx, mod) else None
        return fail(f"No module named '{mod}'{via}, imported at {_loc(item)}{_also_at(item, lines)}"
                    + (f": {mean}" if mean else ""),
                    causes.MISSING_MODULE, evidence=tuple(ev), details=item["traceback"],
                    fix=_missing_fix(ctx, item, request) + _own_venv_note(ctx), data=data)
    if item["status"] == "syntax" and item.get("syntax"):
        s = item["syntax"]
        ev += [f"{s['file']}:{s['line']}: {s['msg']}", "    " + (s.get("text") or "").strip()]
        return fail(f"{s['file']}:{s['line']} does not compile: {s['msg']} (imported by {_loc(item)})",
                    causes.SYNTAX_ERROR, evidence=tuple(ev), details=item["traceback"],
                    fix=f"Fix the syntax at {s['file']} line {s['line']}; if it is an installed package, it needs a "
                        "newer Python than the training interpreter's.", data=data)
    if item.get("statement"):
        what = "module-level code that reads the environment" if item.get("reads_env") else "module-level code"
        return fail(f"{_loc(item)}: {what}, `{item['text']}`, raises {item['exception']}: "
                    f"{_first_line(item['message'])} at start-up", causes.IMPORT_ERROR, evidence=tuple(ev[:1]), details=item["traceback"],
                    fix="This module-level statement runs before anything is logged. Give the job what it expects "
                        "(a variable, a file; torchrun sets RANK/LOCAL_RANK), or read it with a default.", data=data)
    typo = typos.name_words(item.get("near_name"), _loc(item), _pin(ctx, item))
    if typo is not None:  # before the corpus, which reads any missing name as another version of the package
        return fail(f"import of {item['name']} raises {item['exception']}: {typo[0]}", causes.IMPORT_ERROR,
                    evidence=tuple(ev), details=item["traceback"], fix=typo[1], data=data)
    known = _known(ctx, item)
    if known is not None:
        return fail(f"import of {item['name']} raises {item['exception']}: {_first_line(item['message'])}: "
                    f"{known.summary}", known.cause, evidence=tuple(ev + known.evidence), details=item["traceback"],
                    fix=known.fix, data=data)
    return fail(f"import of {item['name']} raises {item['exception']}: {_first_line(item['message'])}",
                causes.IMPORT_ERROR, evidence=tuple(ev), details=item["traceback"],
                fix="Read the traceback's last lines: the exception is raised while the module loads, before the "
                    "job can write its log. Fix it there, or move that work out of module level.", data=data)


def _own_module_at_run_time(ctx, mod: str, request: dict, item: dict, ev: list, data: dict) -> Optional[Result]:
    """A module the project itself provides, above the script's folder, which the project puts on sys.path at run
    time in a way the probe could not run (a helper of its own, its Makefile's PYTHONPATH): the import failing here
    is a reading of how the job starts, not what it does, so it warns and never blocks the launch."""
    from dfdoctor.project import runtime_path  # start-up: see the note at the imports
    if not ctx.target.runs_here or not request.get("path0") or not item.get("file"):
        return None
    folder = runtime_path.provider(mod, Path(request["path0"]))
    if folder is None:
        return None
    line = runtime_path.setup_line([Path(item["file"])], folder)
    if line is None:
        return None
    top = mod.split(".")[0]
    return warn(f"No module named '{mod}' where Python starts {_short(item['file'], ctx.cwd)} (sys.path[0] is "
                f"{request['path0']}), but {top} is the project's own, in {folder}, and the project puts that "
                f"folder on sys.path at run time ({line}): not judged before the launch", causes.MISSING_MODULE,
                evidence=tuple(ev) + (line,), details=item["traceback"],
                fix=f"Nothing to change if the job imports {top} once its path set-up ran (the launch shows it); "
                    f"if it does not, set PYTHONPATH={folder} or run it from {folder} with `python -m`.",
                data=data, basis=STATIC)


def _known(ctx, item: dict) -> Optional[Finding]:
    """What the corpus of real failures knows of the exception an import raised (a torchvision not paired with
    torch, a numpy ABI break, an extension built for another torch), in the job's own terms; else a download the
    import made that could not reach its host (a tokenizer fetched at import: build-nanogpt's hellaswag.py)."""
    from dfdoctor.diagnose import known_failures, rules_runtime  # start-up: see the note at the imports
    from dfdoctor.diagnose.rules_runtime import Context
    from dfdoctor.diagnose.traceback import parse_python_error
    err = parse_python_error(item.get("traceback") or "")
    if err is None:
        return None
    local = ctx.target.runs_here
    told = Context(argv=list(ctx.command), cwd=str(ctx.cwd), local=local, python=ctx.python if local else None)
    return known_failures.classify(err, told) or rules_runtime.download_failed(err, told)


def _missing_fix(ctx, item: dict, request: Optional[dict] = None) -> str:
    """How to make a missing module importable: install its distribution, or fix sys.path for a local one."""
    from dfdoctor.diagnose import torch_pairs, user_terms  # start-up: see the note at the imports
    from dfdoctor.diagnose.rules_runtime import Context
    from dfdoctor.project import typos
    from dfdoctor.project.install import PIP_NAMES
    mod = item.get("missing") or item["name"]
    top = mod.split(".")[0]
    if request is not None:
        for root in {str(ctx.cwd), request["path0"]}:
            if (Path(root) / top).is_dir() or (Path(root) / f"{top}.py").is_file():
                if root != request["path0"]:
                    return (f"{top} exists in {root}, but the job's sys.path[0] is {request['path0']}: run from the "
                            f"project root with `python -m`, or set PYTHONPATH={root}")
                return f"{top} is a local module in {root}, but '{mod}' is not in it: check the module's name and files"
    local = ctx.target.runs_here
    typo = typos.module_fix(mod, item.get("near"), _typo_loc(item), _declared(ctx, mod), _install(ctx),
                            ctx.python) if _typed(item) else None
    if typo:
        return typo
    paired = torch_pairs.missing_fix(top, ctx.python) if local else None
    if paired:
        return paired
    in_terms = user_terms.module_fix(mod, Context(argv=list(ctx.command), cwd=str(ctx.cwd), local=local,
                                                  python=ctx.python)) if local else None
    if in_terms:
        return in_terms
    dist = PIP_NAMES.get(mod) or PIP_NAMES.get(top) or top.replace("_", "-")
    looked = _typed(item) and isinstance(item.get("near"), dict) and not item["near"].get("near")
    return (f"{shlex.quote(ctx.python)} -m pip install {dist}   (install it into the interpreter the job runs; "
            + ("nothing installed there has a name close to it; " if looked else "") + "not tried)")


def _typed(item: dict) -> bool:
    """The missing module is named by the job's own code (`import torchh` in train.py or in a module of the
    project), so a typo there is the job's; one an installed library imports (`tokenizers`, by transformers)
    is not."""
    mod, name = item.get("missing") or item["name"], item["name"]
    raised_in = (item.get("where") or {}).get("file") or ""
    return mod == name or name.startswith(mod + ".") or \
        bool(raised_in) and not raised_in.startswith("<") and "-packages" not in raised_in


def _typo_loc(item: dict) -> str:
    """Where the mistyped name is written: the job's import line, or the line of the project's module under it."""
    w = item.get("where") or {}
    if w.get("file") and (w["file"], w.get("line")) != (item.get("file"), item.get("line")):
        return f"{w['file']}:{w['line']}"
    return _loc(item)


def _pin(ctx, item: dict) -> Optional[tuple[str, str]]:
    """The project's `NAME==VERSION` pin of the distribution a `from MODULE import NAME` reads from."""
    from dfdoctor.diagnose import user_terms  # start-up: see the note at the imports
    from dfdoctor.diagnose.rules_runtime import Context
    from dfdoctor.project import typos
    module = (item.get("near_name") or {}).get("module")
    proj = user_terms.project_of(Context(argv=list(ctx.command), cwd=str(ctx.cwd), local=ctx.target.runs_here))
    return typos.pin_of(proj.install if proj else None, module) if module else None


def _own_venv_note(ctx) -> str:
    """dfdoctor's own virtual environment is active in the shell (VIRTUAL_ENV is its prefix) and the job's
    `python` is that venv's: the job would run there, without its packages. Say so, rather than have them
    installed into dfdoctor's venv."""
    venv = ctx.env.get("VIRTUAL_ENV")
    if not venv or not ctx.target.runs_here or not ctx.python or sys.prefix == sys.base_prefix:
        return ""
    if os.path.realpath(venv) != os.path.realpath(sys.prefix) or \
            os.path.dirname(os.path.abspath(ctx.python)) != os.path.join(sys.prefix, "bin"):
        return ""
    return (f" Note: {ctx.python} is dfdoctor's own virtual environment ({venv}), active in this shell: "
            "`deactivate` it before checking and launching, or pass --python with the job's interpreter.")


def _declared(ctx, module: str) -> Optional[str]:
    """Where the job's project declares the module's distribution (None: it does not, or it was not read)."""
    install = _install(ctx)
    return install.declares(module) if install is not None else None


def _install(ctx):
    """How the job's project installs (project.install.Install; None: it was not read)."""
    from dfdoctor.diagnose import user_terms  # start-up: see the note at the imports
    from dfdoctor.diagnose.rules_runtime import Context
    proj = user_terms.project_of(Context(argv=list(ctx.command), cwd=str(ctx.cwd), local=ctx.target.runs_here))
    return proj.install if proj is not None else None


def _not_found_fix(spec: LaunchSpec, local: bool = False) -> str:
    """What to do about a command, interpreter, script or launcher that is not there (a script, on this machine:
    the file of its folder whose name is closest, `main.py` for `mian.py`, seen to be there)."""
    from dfdoctor.diagnose import user_terms  # start-up: see the note at the imports
    problem = spec.problem or ""
    if "CRLF" in problem and spec.launcher is not None:
        return f"sed -i 's/\\r$//' {shlex.quote(str(spec.launcher))}   (or save it with Unix line endings)"
    if "not executable" in problem:
        return f"chmod +x {shlex.quote(problem.split(':')[0])}, or run it with its interpreter (bash x.sh / python x.py)"
    if spec.script is not None and "script" in problem:
        near = user_terms.mistyped_script(str(spec.script), spec.argv) if local else None
        if near is not None:
            return near
        return f"check the path and the job's working directory (--cwd); {spec.script} is not there"
    if "command not found" in problem:
        return ("the command is not on the job's PATH: use the interpreter's absolute path "
                "(e.g. /path/to/venv/bin/python) or activate the environment in the launcher")
    return "check the path in the command (and in the launcher script, if one is used)"


def _current_import(stderr: str) -> Optional[tuple[str, str]]:
    """The import the probe had started but not finished, from its marker lines."""
    started: list[tuple[str, str]] = []
    for line in stderr.splitlines():
        if line.startswith(MARK):
            parts = line.split()
            if len(parts) >= 3 and parts[1] == "start":
                started.append((parts[2], parts[3] if len(parts) > 3 else ""))
            elif len(parts) >= 3 and parts[1] == "done" and started and started[-1][0] == parts[2]:
                started.pop()
    return started[-1] if started else None


def _stacks(stderr: str) -> str:
    """The faulthandler dump (every thread's stack) from the probe's stderr."""
    m = re.search(r"^(Timeout \(|Thread 0x|Current thread 0x|Fatal Python error)", stderr, re.M)
    return stderr[m.start():] if m else _tail(stderr, 60)


def _readable(stacks: str) -> str:
    """The dump without dfdoctor's probe frames, importlib's plumbing and the probe's marker lines."""
    keep = [ln for ln in stacks.splitlines()
            if "import_probe.py" not in ln and "<frozen importlib" not in ln and not ln.startswith(MARK)]
    return "\n".join(keep)


def _innermost_frames(stacks: str, n: int = 5) -> list[str]:
    """Where the main thread is stuck: the top frames of the dump's thread that runs the probe's imports."""
    blocks = re.split(r"\n(?=(?:Current thread|Thread) 0x)", stacks)
    main = next((b for b in blocks if "import_probe.py" in b), blocks[0] if blocks else "")
    frames = [ln.strip() for ln in main.splitlines()
              if ln.lstrip().startswith("File") and "<frozen importlib" not in ln and "import_probe.py" not in ln]
    return frames[:n]


def _spec_data(spec: LaunchSpec) -> dict[str, Any]:
    """The parsed launch, for the JSON report."""
    return {"runner": spec.runner, "python": spec.python, "script": str(spec.script) if spec.script else None,
            "module": spec.module, "args": spec.script_args, "launcher": str(spec.launcher) if spec.launcher else None,
            "unbuffered": spec.unbuffered, "cwd": str(spec.cwd) if spec.cwd else None,
            "unknown": list(spec.unknown)}


def _related(mod: str, name: str) -> bool:
    """The missing module is the one the import names, or a package or module of it (not one it needs)."""
    return mod == name or mod.startswith(name + ".") or name.startswith(mod + ".")


def _other_lines(first: dict, same: Sequence[dict], mod: str) -> tuple[list[dict], list[str]]:
    """(the other lines that import the missing module `mod`, each once and not the first's; their evidence)."""
    seen, lines, evidence = {_loc(first)}, [], []
    for item in same:
        at = _line_of(item, mod)
        if _loc(at) not in seen:
            seen.add(_loc(at))
            lines.append(at)
            evidence.append(f"{_loc(at)}: {at['text']}" + (f" (imported by {_loc(item)})" if at is not item else ""))
    return lines, evidence


def _line_of(item: dict, mod: str) -> dict:
    """The line that imports the missing module `mod`: the import's own, or, where it imports a module of the
    project that needs it (`import data`, whose data.py imports torch), the line of that module that raised."""
    w = item.get("where") or {}
    return item if _related(mod, item["name"]) or not w.get("file") else w


def _said_at(item: dict) -> str:
    """An import as evidence: `file:line: the line`, or its text when it has no file."""
    return f"{_loc(item)}: {item['text']}" if item.get("file") else item["text"]


def _also_at(first: dict, same: list[dict]) -> str:
    """The other lines that import the same missing module (each a dict with its file, line and text), after the
    first one's `file:line`: ` (also lines 3 and 4; /p/data.py:2)`; '' where there are none."""
    by_file: dict[str, list[str]] = {}
    for item in same:
        by_file.setdefault(item.get("file") or "", []).append(str(item.get("line") or item.get("text", "")))
    parts = []
    for file, lines in by_file.items():
        listed = ", ".join(lines[:-1]) + " and " + lines[-1] if len(lines) > 1 else lines[0]
        if file and file == first.get("file"):
            parts.append(("lines " if len(lines) > 1 else "line ") + listed)
        elif file:
            parts.append(f"{file}:{lines[0]}" if len(lines) == 1 else f"{file} lines {listed}")
        else:
            parts.append(listed)
    return f" (also {'; '.join(parts)})" if parts else ""


def _loc(item: dict) -> str:
    """`file:line` of an import, or its text when it has no file (`-m pkg`)."""
    return f"{item['file']}:{item['line']}" if item.get("file") else item.get("text", "")


def _short(path: str, cwd: Path) -> str:
    """A path relative to the job's folder when it is inside it."""
    try:
        return str(Path(path).relative_to(cwd))
    except ValueError:
        return path


def _first_line(text: str) -> str:
    """The first non-empty line of a message."""
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def _tail(text: str, n: int) -> str:
    """The last n lines of a text."""
    return "\n".join(text.splitlines()[-n:])
