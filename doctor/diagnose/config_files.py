"""A job refused by its configuration files: a yaml file that does not parse (`config-invalid`, with the file,
line and caret the yaml error itself gives, and what loaded that file: a config group's choice or the option that
named it), and hydra's own refusals of the command's overrides (`bad-arguments`): an override of a key the config
does not have (`data.batchsize=8`, closest `data.batch_size`) and a config group option that does not exist
(`trainer=gpus`, from the options hydra lists). Hydra prints these without a traceback and exits 1, so the verdict
reads its text from the job's output; with HYDRA_FULL_ERROR=1 the same text ends a traceback.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from dfdoctor import causes
from dfdoctor.diagnose.rules_runtime import Context, Finding
from dfdoctor.diagnose.traceback import PyError
from dfdoctor.lazy_re import compile_later

if TYPE_CHECKING:
    from dfdoctor.project import configs

_MARK = compile_later(r'in "(?P<file>[^"]+\.ya?ml)", line (?P<line>\d+), column (?P<col>\d+)')
_OVERRIDE = compile_later(r"Could not override '(?P<key>[^']+)'")
# omegaconf's reason, printed after hydra's line, or before it (in the chained traceback of HYDRA_FULL_ERROR=1)
_ABSENT = compile_later(r"Key '(?P<leaf>[^']+)' is not in struct")
_NO_OPTION = compile_later(r"Could not (?:find|load) '(?P<group>[^']+)/(?P<opt>[^'/]+)'[\s\S]{0,300}?"
                           r"Available options in '[^']+':\n(?P<opts>(?:[ \t]+\S[^\n]*\n?)+)")


def yaml_broken(err: PyError, ctx: Context) -> Optional[Finding]:
    """A yaml parser's error (`mapping values are not allowed here`, `found character '\\t'`) in a config file of
    the job's, named with its line and the option or config group that loaded it."""
    if "yaml" not in err.exc_type.lower() and "Yaml" not in err.exc_type:
        return None
    marks = list(_MARK.finditer(err.text))
    if not marks:
        return None
    m = marks[-1]  # yaml prints the context's mark first, then the problem's
    path, line, col = Path(m.group("file")), int(m.group("line")), int(m.group("col"))
    if "site-packages" in str(path):
        return None
    shown = _short(path, ctx)
    text = _line_of(path, line)
    why = err.message.strip().splitlines()[0] if err.message.strip() else err.exc_type
    indent = len(text) - len(text.lstrip(" ")) if text is not None else 0
    evidence = [f"{err.exc_type}: {why}", f"{shown}:{line}, column {col}: {text.strip()}"
                + (f"   (indented {indent} spaces)" if indent else "") if text is not None else f"{shown}:{line}"]
    loaded = _loaded_by(path, ctx)
    summary = f"The config file {shown} does not parse: {why} at line {line}, column {col}" + \
        (f"; {loaded}" if loaded else "") + "."
    fix = (f"Fix {shown} at line {line} (column {col}): in yaml a key's indentation says which mapping it belongs "
           "to, so a key indented under a plain value, a tab, or a missing space after `:` breaks it. Check the file "
           f"alone with: python -c \"import yaml; yaml.safe_load(open('{path}'))\"; not tried.")
    return Finding(causes.CONFIG_INVALID, summary, fix, evidence)


def hydra_refused(text: str, ctx: Context) -> Optional[Finding]:
    """Hydra's own words refusing the command's overrides, in the job's output (status 1, no traceback)."""
    return _override_refused(text, ctx) or _option_missing(text, ctx)


def _override_refused(text: str, ctx: Context) -> Optional[Finding]:
    m, absent = _OVERRIDE.search(text), _ABSENT.search(text)
    if m is None or absent is None:
        return None  # an override of a key that exists, refused for its value, is another matter
    # (imported past the question: every failed job's output is asked it, and hydra's words are rare)
    from dfdoctor.project import configs  # start-up: the project model, read for a fix alone (issue 45)
    from dfdoctor.diagnose import user_terms  # start-up: the project model, read for a fix alone (issue 45)
    key = m.group("key")
    word = next((a for a in ctx.argv if a.lstrip("+~").split("=", 1)[0] == key), key)
    value = word.split("=", 1)[1] if "=" in word else None
    proj = user_terms.project_of(ctx)
    folder = configs.config_dir(proj.script, proj.root) if proj is not None else None
    known = configs.keys(folder) if folder is not None else []
    parent = key.rpartition(".")[0]
    near = _closest(key, [k for k in known if k.name.rpartition(".")[0] == parent]) or _closest(key, known)
    evidence = [f"hydra said: Could not override '{key}'. ... Key '{absent.group('leaf')}' is not in struct"]
    summary = f"Hydra refused the override {word}: the config has no key {key}" + \
        (f"; the closest is {near.name}, set at {near.where(folder.parent)}" if near else "") + "."
    if near is not None:
        good = f"{near.name}={value}" if value is not None else near.name
        fix = (f"Write {good} instead of {word} (the closest key of the config, {near.where(folder.parent)}); "
               f"`+{word}` would add a new key that the code does not read; not tried.")
    else:
        fix = (f"Drop {word}, or spell it as a key of the config (`python {_script(proj)} --cfg job` prints them); "
               "not tried.")
    return Finding(causes.BAD_ARGUMENTS, summary, fix, evidence)


def _option_missing(text: str, ctx: Context) -> Optional[Finding]:
    m = _NO_OPTION.search(text)
    if m is None:
        return None
    group, opt = m.group("group"), m.group("opt")
    options = [o.strip() for o in m.group("opts").splitlines() if o.strip()]
    word = next((a for a in ctx.argv if a.lstrip("+~") in (f"{group}={opt}", f"{group.replace('/', '.')}={opt}")), None)
    near = difflib.get_close_matches(opt, options, n=1, cutoff=0.5)
    said = f"the command's {word}" if word else f"{group}: {opt} in a defaults list"
    evidence = [f"hydra said: Could not find '{group}/{opt}'", f"hydra's options for {group}: {', '.join(options)}"]
    summary = f"Hydra has no config {opt!r} in the group {group} ({said}); its options are {', '.join(options)}."
    fix = (f"Write {group}={near[0]} instead of {word or f'{group}={opt}'} (the closest of the options hydra "
           f"lists for {group}); not tried.") if near else \
        f"Choose one of the options hydra lists for {group}: {', '.join(f'{group}={o}' for o in options)}; not tried."
    return Finding(causes.BAD_ARGUMENTS, summary, fix, evidence)


def _closest(key: str, known: list) -> Optional[configs.Key]:
    names = {k.name: k for k in known}
    hit = difflib.get_close_matches(key, list(names), n=1, cutoff=0.6)
    return names[hit[0]] if hit and hit[0] != key else None


def _loaded_by(path: Path, ctx: Context) -> str:
    """What loaded the file: an option of the command that names it, or the config group choice that selects it."""
    from dfdoctor.project import configs  # start-up: the project model, read for a fix alone (issue 45)
    from dfdoctor.diagnose import user_terms  # start-up: the project model, read for a fix alone (issue 45)
    for i, word in enumerate(ctx.argv):
        value = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
        if value.endswith((".yaml", ".yml")) and _same(value, path, ctx):
            flag = word.split("=", 1)[0] if "=" in word and word.startswith("-") else \
                (ctx.argv[i - 1] if i and ctx.argv[i - 1].startswith("-") else None)
            return f"the command loads it with {flag} {value}" if flag else f"the command names it ({value})"
    proj = user_terms.project_of(ctx)
    folder = configs.config_dir(proj.script, proj.root) if proj is not None else None
    if folder is None or folder not in path.resolve().parents:
        return ""
    rel = path.resolve().relative_to(folder)
    if len(rel.parts) < 2:
        return f"it is the primary config ({rel})"
    group, option = "/".join(rel.parts[:-1]), rel.stem
    word = next((a for a in ctx.argv if a.lstrip("+~") == f"{group}={option}"), None)
    if word:
        return f"the command's {word} loads it"
    at = configs.chosen_at(folder, group, option)
    return f"loaded as {group}={option}" + (f", chosen by the defaults list at {at}" if at else "")


def _same(value: str, path: Path, ctx: Context) -> bool:
    p = Path(value)
    if not p.is_absolute():
        p = Path(ctx.cwd or ".") / p
    try:
        return p.resolve() == path.resolve()
    except OSError:
        return False


def _short(path: Path, ctx: Context) -> str:
    for base in (ctx.cwd,):
        if base:
            try:
                return str(path.resolve().relative_to(Path(base).resolve()))
            except ValueError:
                pass
    return str(path)


def _line_of(path: Path, line: int) -> Optional[str]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    return lines[line - 1] if 0 < line <= len(lines) else None


def _script(proj) -> str:
    return proj.short(proj.script) if proj is not None and proj.script else "SCRIPT"
