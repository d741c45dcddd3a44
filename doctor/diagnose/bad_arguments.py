"""A job whose argument parser refused its command line: `bad-arguments`, naming the argument it refused and the
closest valid option.

argparse (and jsonargparse, LightningCLI) print their usage and `PROG: error: unrecognized arguments: --epoch 3`
(jsonargparse 4.x without the PROG) and exit 2; click prints `Error: No such option: --epoch` (with its own "Did
you mean"). The valid options are the
ones the parser listed in its usage on this very run; where the usage does not list them (click's `[OPTIONS]`, a
usage cut short) the project model's options (doctor/project, read from the script's source) say which is closest,
with the file and line that declares it. Key=value parsers (minGPT's CfgNode, nanoGPT's configurator) raise instead
of exiting 2: their exception naming an argument of the command is read the same way (`config_refused`).
"""

from __future__ import annotations

import difflib
import re
from typing import Optional

from dfdoctor import causes
from dfdoctor.diagnose.rules_runtime import Context, Finding
from dfdoctor.diagnose.traceback import PyError, is_library
from dfdoctor.model import Verdict
from dfdoctor.lazy_re import compile_later

_REFUSED = [
    (compile_later(r"^(?:\[rank\d+\]:)?(?:(?P<prog>\S+): )?error: unrecognized arguments: (?P<args>.+)$", re.M | re.I),
     "unrecognized"),
    (compile_later(r"^(?:\[rank\d+\]:)?(?:(?P<prog>\S+): )?error: argument (?P<args>\S+): (?P<why>.+)$", re.M),
     "invalid"),
    (compile_later(r"^(?:\[rank\d+\]:)?(?:(?P<prog>\S+): )?error: the following arguments are required: (?P<args>.+)$",
                   re.M), "required"),
    (compile_later(r"^(?:\[rank\d+\]:)?Error: No such option: (?P<args>\S+)(?P<why>.*)$", re.M), "unrecognized"),
]
_OPTION = compile_later(r"(?<![\w-])(--?[A-Za-z][\w.-]*)")


def refused(text: str, ctx: Context, status: str) -> Optional[Verdict]:
    """The verdict for a parser's refusal printed in `text` (a job's stderr, or a rank's under torchrun), else
    None. `status` is the evidence line saying how the job ended."""
    from dfdoctor.diagnose import user_terms  # start-up: the project model, read for a fix alone (issue 45)
    for rx, kind in _REFUSED:
        m = rx.search(text)
        if m:
            break
    else:
        return _fire_refused(text, ctx, status)
    usage = text[:m.start()]
    options = list(dict.fromkeys(o for o in _OPTION.findall(usage[usage.rfind("usage:"):] if "usage:" in usage
                                                            else usage) if o not in ("-h", "--help")))
    line = m.group(0).strip()
    proj = user_terms.project_of(ctx)
    where = m.groupdict().get("prog") or (f"{proj.short(proj.script)}'s parser" if proj and proj.script else
                                          "the job's parser")
    evidence = [status, f"the parser said: {line}"]
    if kind == "required":
        names = [a for a in re.split(r"[,\s]+", m.group("args")) if a]
        declared = [o for o in (proj.option(n) for n in names) if o is not None and o.where] if proj else []
        evidence += [f"{o.where}: {o.dest} is declared there" for o in declared]
        at = f" (declared at {', '.join(o.where for o in declared)})" if declared else ""
        return Verdict("failed", causes.BAD_ARGUMENTS, f"{where} refused its command line: it needs "
                       f"{m.group('args')}{at}.", f"Add {m.group('args')} to the command"
                       + (f", as the README runs it: `{proj.runs()[0].text}` ({proj.runs()[0].where})"
                          if proj and proj.runs() else "") + ".", evidence)
    bad = [a for a in m.group("args").split() if a.startswith("-")] or m.group("args").split()[:1]
    hints = []
    for arg in bad:
        name = arg.split("=", 1)[0]
        value = arg.split("=", 1)[1] if "=" in arg else None
        close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
        if close and close[0] != name:
            hints.append((arg, close[0] + (f"={value}" if value is not None else ""), "the closest option its usage "
                          "lists"))
            continue
        near = user_terms.option_near(name, ctx) if proj and kind == "unrecognized" else None
        if near is not None and near.flag != name:
            hints.append((arg, near.flag + (f"={value}" if value is not None else ""),
                          f"the closest option of {proj.short(proj.script) if proj.script else 'the script'}"
                          + (f", declared at {near.where}" if near.where else "")))
    if options:
        evidence.append(f"the options its usage lists: {' '.join(options[:30])}" + (" ..." if len(options) > 30
                                                                                       else ""))
    what = f"{m.group('args').strip()}" if kind == "unrecognized" else f"{m.group('args')} ({m.group('why').strip()})"
    said = "does not know" if kind == "unrecognized" else "refused"
    declared = _declared(proj, m.group("args").split()[0].split("=")[0] if kind == "invalid" else None)
    summary = f"{where} {said} {what}: the job stopped before it started (exit status 2)" + \
        (f"; {declared}." if declared else ".")
    if hints:
        fix = "; ".join(f"write {good} instead of {arg} ({why})" for arg, good, why in hints) + "; not tried."
    elif kind == "invalid":
        fix = _choice_fix(m.group("args"), m.group("why")) or \
            f"Give {m.group('args')} a value it accepts: {m.group('why').strip()}."
    elif proj is not None and proj.options.complete and proj.options.options and \
            any(a.split("=")[0].lstrip("-").replace("-", "_") in _DEVICE_WORDS for a in bad):
        own = [o for o in proj.options.options if o.dest.lower() in _DEVICE_WORDS + _CPU_WORDS]
        fix = (f"Drop {m.group('args').strip()} from the command: {where} has no such option and picks its device "
               "itself" + (" (its own device options: " + ", ".join(f"{o.flag} at {o.where}" for o in own) + ")"
                           if own else "") + "; not tried.")
    else:
        fix = "Drop the arguments it does not know, or spell them as its usage lists them (`--help` shows them all)."
    return Verdict("failed", causes.BAD_ARGUMENTS, summary, fix, evidence)


_FIRE = compile_later(r"^ERROR: Could not consume arg: (?P<arg>\S+)$", re.M)


def _fire_refused(text: str, ctx: Context, status: str) -> Optional[Verdict]:
    """`fire` calls the function with the arguments it recognises and only then finds one it cannot consume
    (`ERROR: Could not consume arg: --epoch=3`, status 2): the job ran, with that parameter at its default. Its
    usage then lists the methods of what the function returned, not the options, so the closest option is the
    project model's (the function's parameters)."""
    from dfdoctor.diagnose import user_terms  # start-up: the project model, read for a fix alone (issue 45)
    m = _FIRE.search(text)
    if m is None:
        return None
    arg = m.group("arg")
    proj = user_terms.project_of(ctx)
    near = proj.options.closest(arg) if proj is not None and proj.options.kind == "fire" else None
    value = arg.split("=", 1)[1] if "=" in arg else None
    evidence = [status, f"fire said: {m.group(0).strip()}"]
    ran = ""
    if near is not None:
        evidence.append(f"{near.flag} is a parameter of the function fire runs, declared at {near.where}"
                        + (f" (default {near.default!r})" if near.default is not None else ""))
        ran = f"; the job ran with {near.dest}={near.default!r}, its default" if near.default is not None else ""
    summary = f"fire could not use {arg}: the function ran without it and fire refused it at the end (exit " \
              f"status 2){ran}."
    if near is not None and near.flag != arg.split("=", 1)[0]:
        fix = f"Write {near.spelled(value) if value is not None else near.flag} instead of {arg} (the closest " \
              f"parameter of the function fire runs, declared at {near.where}); not tried."
    else:
        fix = "Spell the argument as a parameter of the function fire runs (`--help` lists them); not tried."
    return Verdict("failed", causes.BAD_ARGUMENTS, summary, fix, evidence)


_CHOICE = compile_later(r"invalid choice: '(?P<value>[^']*)' \(choose from (?P<choices>.+)\)")


def _choice_fix(flag: str, why: str) -> str:
    """argparse's `invalid choice: 'mnst' (choose from 'fake', 'folder', 'mnist')`: the closest choice it lists."""
    m = _CHOICE.search(why)
    if m is None:
        return ""
    choices = [c.strip().strip("'\"") for c in m.group("choices").split(",")]
    near = difflib.get_close_matches(m.group("value"), choices, n=1, cutoff=0.5) or \
        [c for c in choices if c.lower() == m.group("value").lower()]
    flag = flag.split("/")[-1]
    if not near:
        return f"Give {flag} one of the choices its parser lists: {', '.join(choices)}; not tried."
    return (f"Write {flag} {near[0]} instead of {flag} {m.group('value')} (the closest of the choices its parser "
            f"lists: {', '.join(choices)}); not tried.")


# Options by which users ask for a device, and those by which projects run on the CPU (user_terms' device switch).
_DEVICE_WORDS = ("device", "devices", "gpu", "gpus", "cuda", "accelerator", "accel", "gpu_id", "gpu_ids", "use_gpu",
                 "use_cuda")
_CPU_WORDS = ("cpu", "use_cpu", "no_cuda", "no_accel", "no_gpu", "disable_cuda", "force_cpu", "no_mps")


def _declared(proj, name: Optional[str]) -> str:
    """Where the script's parser declares its options (the one named, else all of them): the user's file and
    line for a refusal that prints no traceback."""
    if proj is None or proj.script is None:
        return ""
    option = proj.option(name) if name else None
    if option is not None and option.where:
        return f"{option.flag} is declared at {option.where}"
    lines = sorted(o.line for o in proj.options.options if o.line and o.file and
                   proj.short(proj.script) == o.file)
    if not lines:
        return ""
    span = f"{lines[0]}" if lines[0] == lines[-1] else f"{lines[0]}-{lines[-1]}"
    return f"its options are declared at {proj.short(proj.script)}:{span}"


def config_refused(err: PyError, ctx: Context) -> Optional[Finding]:
    """A key=value parser (minGPT's CfgNode, nanoGPT's configurator) that raised on an argument of the command:
    its message names the argument (`trainer.max_iter is not an attribute`, `Unknown config key: max_iter`,
    `... of form --arg=value, got --trainer.max_iters`). Read only where the project model says the script's
    options are parsed that way, so another exception that happens to quote an argument is left alone."""
    from dfdoctor.diagnose import user_terms  # start-up: the project model, read for a fix alone (issue 45)
    proj = user_terms.project_of(ctx) if ctx.local else None
    if proj is None or proj.options.kind not in ("cfgnode", "configurator"):
        return None
    args = list(proj.args)
    for i, word in enumerate(args):
        if not word.startswith("--"):
            continue
        key = word[2:].split("=", 1)[0]
        if not re.search(rf"(?<![\w.]){re.escape(key)}(?![\w])", err.message):
            continue
        known = proj.option(key)
        value = word.split("=", 1)[1] if "=" in word else (args[i + 1] if i + 1 < len(args) and
                                                           not args[i + 1].startswith("--") else None)
        evidence = [f"message: {err.headline[:300]}", f"the command gives {word}"]
        at = _real_blame(err)
        if known is not None and "=" not in word:
            good = known.spelled(value if value is not None else "VALUE")
            given = f"{word} {value}" if value is not None else word
            why = f"this project's options take key=value (declared at {known.where})" if known.where else \
                "this project's options take key=value"
        else:
            near = user_terms.option_near(key, ctx)
            if near is None:
                return Finding(causes.BAD_ARGUMENTS, f"The job's configuration refused {word} at {at}: "
                               f"{err.message}", f"Drop {word}, or spell it as one of the script's options "
                               "(its config, not `--help`, lists them); not tried.", evidence)
            good, given = near.spelled(value if value is not None else "VALUE"), word
            why = f"the closest option of this project" + (f", declared at {near.where}" if near.where else "")
        return Finding(causes.BAD_ARGUMENTS, f"The job's configuration refused {given} at {at}: "
                       f"{err.message}", f"Write {good} instead of {given} ({why}); not tried.", evidence)
    return None


def _real_blame(err: PyError) -> str:
    """The job's line in a file: nanoGPT's configurator runs as exec'd text (`<string>`), so the line that runs
    it (`exec(open('configurator.py').read())` in train.py) is named instead."""
    if err.user_frame and not err.user_frame[0].startswith("<"):
        return err.blame
    for file, line, code in reversed(err.frames):
        if not file.startswith("<") and not is_library(file):
            return f"{file}, line {line}" + (f" (`{code.strip()}`)" if code else "")
    return err.blame
