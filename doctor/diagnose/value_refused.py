"""A value the command gave an option that the job's own code refused after parsing it: `bad-arguments`, naming
the option, the value, what the code requires or accepts, and the closest accepted value.

Two shapes, both read from the traceback and the command line, never guessed from the source alone:
- an `assert` (or a raise) on the job's own line that reads the option (`assert opt.imageSize % 16 == 0`, with
  `--imageSize 20` on the command): the condition and its message say what the value must be;
- an exception whose message quotes the value itself (a registry's `RuntimeError: Unknown model (dcgann)`,
  `KeyError: 'dcgann'`, `ValueError: unknown dataset cifar`): the registry refused the name. The accepted names
  come from the message where it lists them, else from the names the raising file registers (functions under a
  `@register...` decorator, keys of a dict literal) and the option's default.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
from pathlib import Path
from typing import Optional

from dfdoctor import causes
from dfdoctor.diagnose.rules_runtime import Context, Finding
from dfdoctor.diagnose.traceback import PyError, is_library
from dfdoctor.lazy_re import compile_later

_NOT_OURS = ("FileNotFoundError", "OSError", "PermissionError", "IsADirectoryError", "NotADirectoryError",
             "ModuleNotFoundError", "ImportError", "OutOfMemoryError", "SyntaxError")
_PATHISH = compile_later(r"\b(?:exists|isdir|isfile|listdir|glob|open)\b|os\.path|Path\(")
# a value ending so names a file (timm's model names have dots too: `vit_base_patch16_224.augreg_in21k`)
_FILE_SUFFIXES = {".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".txt", ".csv", ".json", ".yaml", ".yml", ".npz",
                  ".npy", ".pkl", ".h5", ".tar", ".gz", ".zip", ".jpg", ".png", ".py", ".log"}
_QUOTED = compile_later(r"'([^'\s]{1,60})'|\"([^\"\s]{1,60})\"")


def value_refused(err: PyError, ctx: Context) -> Optional[Finding]:
    """bad-arguments when the job's code refused a value its command line gave an option."""
    if err.exc_type.endswith(_NOT_OURS) or not ctx.local:
        return None
    from dfdoctor.diagnose import user_terms  # start-up: the project model, read for a fix alone (issue 45)
    proj = user_terms.project_of(ctx)
    if proj is None or not proj.options.options:
        return None
    given = [(o, proj.given(o)) for o in proj.options.options]
    given = [(o, v) for o, v in given if v is not None and o.flags]
    return _asserted(err, proj, given) or _named(err, proj, given)


def _asserted(err: PyError, proj, given) -> Optional[Finding]:
    """The job's own failing line reads the option (`opt.imageSize`, `args.image_size`) and is no path check."""
    code = err.user_code or ""
    if not code.startswith(("assert", "raise")) or _PATHISH.search(code):
        return None  # a library's own assert under a call that passes the option could name the wrong one
    hit = next(((o, v) for o, v in given if re.search(rf"\.{re.escape(o.dest)}\b", code)), None)
    if hit is None:
        return None
    option, value = hit
    condition = code[len("assert"):].split(",")[0].strip() if code.startswith("assert") else code
    said = f" ({err.message.strip().splitlines()[0]})" if err.message.strip() else ""
    default = f", like its default {option.default!r}" if option.default is not None else ""
    summary = (f"{err.user_where} refused {option.flag} {value}: `{code}` fails{said}; the value was parsed, "
               "then the job's own code rejected it.")
    fix = (f"Give {option.flag} a value for which `{condition}` holds{default} ({option.flag} is declared at "
           f"{option.where}); not tried." if code.startswith("assert") else
           f"Give {option.flag} a value {err.user_where} accepts{default}; not tried.")
    return Finding(causes.BAD_ARGUMENTS, summary, fix, [f"the command gives {option.flag} {value}",
                                                        f"message: {err.headline[:300]}"])


def _named(err: PyError, proj, given) -> Optional[Finding]:
    """The exception's message quotes the value the command gave an option (`Unknown model (dcgann)`)."""
    text = err.text
    for option, value in given:
        if len(value) < 3 or value.replace(".", "").replace("-", "").isdigit() or "/" in value or \
                os.path.splitext(value)[1].lower() in _FILE_SUFFIXES:
            continue  # a number, or a path: a message quoting a file is about the file, not a registry's names
        if not re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w-])", text):
            continue
        accepted = _listed(text, value) or _registered(err) or []
        if option.default is not None and isinstance(option.default, str) and option.default not in accepted:
            accepted.append(option.default)
        near = difflib.get_close_matches(value, accepted, n=1, cutoff=0.6)
        raised = f"{err.file}, line {err.line}" if err.file else err.where
        summary = f"The job refused {option.flag} {value}: {err.headline[:200]} (raised at {raised}" + \
            (f", called from {_reader(err, option)})." if _reader(err, option) else ").")
        evidence = [f"the command gives {option.flag} {value}", f"message: {err.headline[:300]}"]
        if accepted:
            evidence.append(f"names it accepts: {', '.join(accepted[:20])}")
        if near:
            fix = f"Write {option.flag} {near[0]} instead of {option.flag} {value} (the closest name it accepts"
            fix += f"; the others: {', '.join(a for a in accepted[:20] if a != near[0])})" if len(accepted) > 1 else ")"
        elif accepted:
            fix = f"Give {option.flag} one of the names it accepts: {', '.join(accepted[:20])}"
        else:
            fix = f"Give {option.flag} a name the code at {raised} knows"
        return Finding(causes.BAD_ARGUMENTS, summary, fix + "; not tried.", evidence)
    return None


def _reader(err: PyError, option) -> str:
    """`file, line N (`code`)` of the job's frame that passed the option on (`create_model(opt.netG, ...)`)."""
    for file, line, code in err.frames:
        if code and re.search(rf"\.{re.escape(option.dest)}\b", code) and not is_library(file):
            return f"{file}, line {line} (`{code.strip()}`)"
    return ""


def _listed(text: str, value: str) -> list[str]:
    """Names the message itself lists after the value (`choose from 'a', 'b'`, `available: [a, b]`)."""
    tail = text.split(value, 1)[1] if value in text else text
    m = re.search(r"(?:choose from|available|one of|expected|valid|supported|options?)\b[^\n]*", tail, re.I)
    if not m:
        return []
    words = [a or b for a, b in _QUOTED.findall(m.group(0))]
    if not words:
        inner = re.search(r"[\[{(]([^\]})]+)[\]})]", m.group(0))
        words = [w.strip(" '\"") for w in inner.group(1).split(",")] if inner else []
    return [w for w in words if w and w != value]


def _registered(err: PyError) -> list[str]:
    """The names the raising file (the innermost frame of the project's own) registers: functions or classes
    under a decorator whose name says register, else the keys of its module-level dict literals."""
    file = next((f for f, _, _ in reversed(err.frames) if not is_library(f) and not f.startswith("<")), None)
    if file is None:
        return []
    try:
        tree = ast.parse(Path(file).read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and any(
                "register" in ast.unparse(d).lower() for d in node.decorator_list):
            names.append(node.name)
    if not names:
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                names += [k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return list(dict.fromkeys(names))
