"""The command-line options a training script takes, read statically from its source (ast), never by running it.

Why static and not `--help` in a probe: a `--help` run executes the script's module-level code (nanoGPT's
configurator style has no help at all and would start training; many scripts import torch and build models before
parsing), costs a torch import (the `check` budget is 1.1x `import torch` in all), and is not possible after a
launch on another machine. The source says the same for the parsers users write: argparse (`add_argument`),
click (`@click.option`), jsonargparse's own ArgumentParser, nanoGPT's `--key=value` configurator (module-level
globals, then `exec(open('configurator.py').read())`) and minGPT's CfgNode (`merge_from_args(sys.argv[1:])` over
`get_config()`). Where the options cannot be known from the source (LightningCLI, `jsonargparse.CLI(fn)`,
HfArgumentParser over dataclasses), `complete` is False: an option not found is then "not known", never "absent".
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from typing import Iterable, Optional

from dfdoctor.project.source import Module, call_name, const

# The options LightningCLI adds for every Trainer (its documented `--trainer.*` surface), known without running it.
_LIGHTNING_TRAINER = ("accelerator", "devices", "strategy", "num_nodes", "precision", "max_epochs", "max_steps",
                      "default_root_dir", "fast_dev_run", "limit_train_batches", "limit_val_batches", "logger",
                      "enable_checkpointing", "log_every_n_steps", "gradient_clip_val", "accumulate_grad_batches")


# Words by which a file reads its command line some other way (a library parser, sys.argv by hand).
_READS_ARGV = ("sys.argv", "argparse", "click", "Fire(", "tyro", "hydra", "absl", "FLAGS", "simple_parsing",
               "HfArgumentParser", "docopt", "typer", "parse_args", "from_cli", "jsonargparse", "CLI(", "getopt",
               "configurator.py")


# Packages that never read the command line when imported or used as training code does.
_NO_PARSER = {"__future__", "os", "sys", "math", "time", "random", "itertools", "functools", "collections", "json",
              "pickle", "io", "re", "typing", "dataclasses", "pathlib", "shutil", "glob", "copy", "string", "csv",
              "torch", "torchvision", "torchaudio", "numpy", "matplotlib", "pandas", "scipy", "PIL", "tqdm",
              "einops", "inspect", "abc", "enum", "contextlib", "warnings", "logging", "datetime", "struct",
              "requests", "urllib", "gzip", "zipfile", "tarfile", "hashlib", "subprocess", "signal", "socket"}


def _imported(m: Module) -> set[str]:
    """The top-level names of the packages a module imports."""
    out = set()
    for node in ast.walk(m.tree) if m.tree is not None else ():
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.split(".")[0])
    return out


@dataclass(frozen=True)
class Option:
    """One option the script takes: how it is spelled, what it sets, its default and where it is declared."""

    flags: tuple[str, ...]  # '--input-file', '-i'; empty for a positional argument
    dest: str  # the name it sets: 'input_file', 'trainer.device'
    default: object = None
    style: str = "argparse"  # argparse | click | configurator | cfgnode | lightning | fire
    file: str = ""
    line: int = 0
    switch: bool = False  # a flag that takes no value (argparse's store_true/store_false, click's is_flag)
    kind: str = ""  # the type its value is read as, where the source names a plain one: 'int', 'float'
    unset: object = None  # a switch's value when not given and no default is written: store_true's False

    @property
    def value_if_not_given(self) -> object:
        """What the script reads when the command does not give it: its default, or a switch's own."""
        return self.default if self.default is not None or not self.switch else self.unset

    @property
    def flag(self) -> str:
        """The long spelling, as a user types it."""
        longs = [f for f in self.flags if f.startswith("--")]
        return (longs or list(self.flags) or [self.dest])[0]

    def spelled(self, value: str, flag: Optional[str] = None) -> str:
        """The option with a value, in the form its parser takes (`--device=cpu` for key=value parsers); `flag`:
        the spelling to use (the short alias the user typed, `-i`), else the long one."""
        if self.style in ("configurator", "cfgnode", "lightning", "fire"):
            return f"{flag or self.flag}={value}"
        return f"{flag or self.flag} {value}"

    @property
    def shorts(self) -> tuple[str, ...]:
        """Its one-letter aliases (`-i`), which take a value written right after them (`-inames.txt`)."""
        return tuple(f for f in self.flags if len(f) == 2 and f[0] == "-" and f[1] != "-") \
            if self.style in ("argparse", "click") else ()

    @property
    def where(self) -> str:
        """file:line of its declaration."""
        return f"{self.file}:{self.line}" if self.file else ""


@dataclass(frozen=True)
class Options:
    """Every option found, the parser kind, and whether the list is complete."""

    kind: str = "none"  # argparse | click | configurator | cfgnode | lightning | jsonargparse | fire | other | none
    options: tuple[Option, ...] = ()
    complete: bool = True  # False: options exist that the source does not list (LightningCLI, CLI(fn))
    abbrev: bool = True  # argparse's allow_abbrev: `--step` is taken for `--steps`

    def find(self, name: str) -> Optional[Option]:
        """The option whose dest or flag is `name` ('device', '--device', 'trainer.device', 'input-file')."""
        want = _norm(name)
        for o in self.options:
            if _norm(o.dest) == want or any(_norm(f) == want for f in o.flags):
                return o
        for o in self.options:  # a section's leaf: 'device' finds 'trainer.device' when only one has it
            if o.style in ("cfgnode", "lightning") and _norm(o.dest).rsplit(".", 1)[-1] == want:
                if sum(_norm(p.dest).rsplit(".", 1)[-1] == want for p in self.options) == 1:
                    return o
        return None

    def ending(self, suffix: str) -> Optional[Option]:
        """The first option whose name ends with `suffix` ('backend' finds `--dist-backend`)."""
        want = _norm(suffix)
        return next((o for o in self.options if _norm(o.dest).endswith(want)), None)

    def single_dash(self, word: str) -> Optional[Option]:
        """The option a word with one dash (`-b`, `-b64`, `-lr`, `-i=x`) gives, read as argparse reads it: the
        flag spelled so exactly, else (argparse, abbreviations allowed) the one single-dash flag it begins, else
        a one-letter flag followed by its value or by more one-letter switches (`-b64`, `-vq`); None: none."""
        name = word.split("=", 1)[0]
        exact = next((o for o in self.options if name in o.flags), None)
        if exact is not None or self.kind not in ("argparse", "click"):
            return exact
        if self.kind == "argparse" and self.abbrev and len(name) > 2:
            begun = {o for o in self.options for f in o.flags if f[:2] != "--" and f.startswith(name)}
            if len(begun) == 1:
                return begun.pop()
        short = next((o for o in self.options if word[:2] in o.shorts), None) if len(word) > 2 else None
        return short if short is not None and self._fits(short, word[2:]) else None

    def _fits(self, short: Option, rest: str) -> bool:
        """What follows a one-letter flag in its word is read as the parser reads it: more one-letter switches
        after a switch (`-vq`), else its value (`-b64`), which must be of its type (`-lr` is `-l r`: no float)."""
        if short.switch:
            return all(any(f"-{c}" in o.shorts and o.switch for o in self.options) for c in rest)
        value = rest[1:] if rest.startswith("=") else rest
        if short.kind in ("int", "float"):
            try:
                (int if short.kind == "int" else float)(value)
            except ValueError:
                return False
        return True

    def exists(self, name: str) -> Optional[bool]:
        """True or False when known; None when the source does not list every option."""
        if self.find(name) is not None:
            return True
        return False if self.complete else None

    def closest(self, word: str) -> Optional[Option]:
        """The option a mistyped `word` most likely meant (`--max_iter` → `--trainer.max_iters`)."""
        want = _norm(word.split("=", 1)[0])
        names = {}
        for o in self.options:
            for n in (o.dest, *o.flags):
                names.setdefault(_norm(n), o)
            names.setdefault(_norm(o.dest).rsplit(".", 1)[-1], o)
        hit = difflib.get_close_matches(want, list(names), n=1, cutoff=0.6)
        if hit:
            return names[hit[0]]
        # then as the usage lists them, dashes kept (as the launch's verdict matches them): `--no-cuda` is close to
        # `--no-accel` there (0.63) and not once the dashes are gone (`no_cuda`, `no_accel`: 0.53)
        flags = {f.lower().replace("_", "-"): o for o in self.options for f in o.flags if f.startswith("--")}
        hit = difflib.get_close_matches(word.split("=", 1)[0].lower().replace("_", "-"), list(flags), n=1, cutoff=0.6)
        return flags[hit[0]] if hit else None


def _norm(name: str) -> str:
    return name.lstrip("-").replace("-", "_").lower()


def read_options(script: Module, local: Iterable[Module]) -> Options:
    """The options of `script`, looking into the project's own modules it imports for parsers and configs."""
    modules = [script, *local]
    if script.tree is None:
        return Options(kind="none", complete=False)
    text = script.text
    if "LightningCLI" in text or ("jsonargparse" in text and "CLI(" in text) or "HfArgumentParser" in text:
        kind = "lightning" if "LightningCLI" in text else "jsonargparse"
        found = tuple(Option((f"--trainer.{k}",), f"trainer.{k}", style="lightning") for k in _LIGHTNING_TRAINER) \
            + tuple(_lightning_classes(script, modules)) if kind == "lightning" else ()
        return Options(kind, found + tuple(o for m in modules for o in _argparse(m)), complete=False)
    fired = _fire(script, modules) if "Fire(" in text else None
    if fired is not None:
        return Options("fire", tuple(fired))
    if "merge_from_args" in text:
        return Options("cfgnode", tuple(_cfgnode(script, modules)))
    if "configurator.py" in text and "exec(" in text:
        return Options("configurator", tuple(_configurator(script)))
    argp = [o for m in modules for o in _argparse(m)]
    clicks = [o for m in modules for o in _click(m)]
    if clicks:
        return Options("click", tuple(clicks))
    if argp:
        return Options("argparse", tuple(argp), complete="parse_known_args" not in text and
                       "add_subparsers" not in text, abbrev="allow_abbrev=False" not in text)
    # No parser of a kind read here: the script takes no options only if nothing in its files reads the command
    # line, and every package it imports is one known not to (an installed `cli.main()` may parse sys.argv)
    reads = any(word in m.text for m in modules for word in _READS_ARGV)
    local = {m.path.stem for m in modules} | {m.path.parent.name for m in modules}
    foreign = {name for m in modules for name in _imported(m)} - local - _NO_PARSER
    return Options("other" if reads or foreign else "none", (), complete=not (reads or foreign))


def _fire(script: Module, modules: list[Module]) -> Optional[list[Option]]:
    """`fire.Fire(train)`: the function's parameters are its options (`--lr=0.1`, `--batch_size=16`); a class's
    are its __init__'s. None when what Fire is given is not a function or class of the project's files (a dict,
    an object, nothing: fire then exposes the whole module)."""
    target = None
    for node in ast.walk(script.tree):
        if isinstance(node, ast.Call) and call_name(node).split(".")[-1] == "Fire" and node.args and \
                isinstance(node.args[0], ast.Name):
            target = node.args[0].id
    if target is None:
        return None
    for m in modules:
        for node in m.tree.body if m.tree is not None else ():
            if isinstance(node, ast.ClassDef) and node.name == target:
                node = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
                if node is None:
                    return None
                return _params(node, m, skip=1)
            if isinstance(node, ast.FunctionDef) and node.name == target:
                return _params(node, m, skip=0)
    return None


def _params(fn: ast.FunctionDef, m: Module, skip: int) -> list[Option]:
    """A function's parameters as fire's `--name` options, with their defaults and lines."""
    args = fn.args.args[skip:]
    defaults = [None] * (len(args) - len(fn.args.defaults)) + list(fn.args.defaults)
    pairs = list(zip(args, defaults)) + list(zip(fn.args.kwonlyargs, fn.args.kw_defaults))
    return [Option((f"--{a.arg}",), a.arg, const(d) if d is not None else None, "fire", m.rel, a.lineno,
                   switch=isinstance(const(d) if d is not None else None, bool)) for a, d in pairs]


def _lightning_classes(script: Module, modules: list[Module]) -> list[Option]:
    """`--model.X` and `--data.X` of `LightningCLI(Model, Data)`: the parameters of each class's __init__, where
    the class is in the project's own files (a class from an installed package is not read)."""
    classes = {}
    for m in modules:
        for node in ast.walk(m.tree) if m.tree is not None else ():
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, (node, m))
    out = []
    for node in ast.walk(script.tree):
        if not (isinstance(node, ast.Call) and call_name(node).endswith("LightningCLI")):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        given = list(node.args[:2]) + [None] * (2 - len(node.args[:2]))
        for section, arg in (("model", kw.get("model_class", given[0])), ("data", kw.get("datamodule_class",
                                                                                         given[1]))):
            name = arg.id if isinstance(arg, ast.Name) else arg.attr if isinstance(arg, ast.Attribute) else None
            if name not in classes:
                continue
            cls, m = classes[name]
            init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
            if init is None:
                continue
            params = [a for a in init.args.args[1:] + init.args.kwonlyargs]
            defaults = [None] * (len(init.args.args[1:]) - len(init.args.defaults)) + list(init.args.defaults) + \
                list(init.args.kw_defaults)
            out += [Option((f"--{section}.{a.arg}",), f"{section}.{a.arg}", const(d), "lightning", m.rel, a.lineno)
                    for a, d in zip(params, defaults)]
    return out


def _argparse(m: Module) -> list[Option]:
    """`X.add_argument('--a', '-a', dest=..., default=...)` anywhere in the module."""
    if "add_argument" not in m.text or m.tree is None:
        return []
    return [o for _, o in argparse_calls(m.tree, m.rel)]


def argparse_calls(tree: ast.AST, rel: str = "") -> list[tuple[ast.Call, Option]]:
    """Every `add_argument` call of a parsed file with the Option it declares (the call too: a reader that
    follows a default's expression, not only its constant, needs it)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and call_name(node).endswith("add_argument"):
            flags = tuple(a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
            if not flags:
                continue
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            dest = const(kw["dest"]) if "dest" in kw else None
            if not isinstance(dest, str):
                named = [f for f in flags if f.startswith("--")] or list(flags)
                dest = named[0].lstrip("-").replace("-", "_")
            out.append((node, Option(tuple(f for f in flags if f.startswith("-")), dest,
                                     const(kw["default"]) if "default" in kw else None, "argparse", rel, node.lineno,
                                     switch=const(kw.get("action")) in ("store_true", "store_false", "store_const",
                                                                         "count"),
                                     kind=_type_name(kw.get("type")),
                                     unset={"store_true": False, "store_false": True}.get(const(kw.get("action"))))))
    return out


def _type_name(node: Optional[ast.AST]) -> str:
    """`type=int` / `type=float` of an add_argument call as 'int' / 'float'; '' for anything else (a function of
    the project's may take any text)."""
    return node.id if isinstance(node, ast.Name) and node.id in ("int", "float") else ""


def _click(m: Module) -> list[Option]:
    """`@click.option('--a', '-a', default=...)` and `@click.argument('name')` decorators."""
    out = []
    if "click" not in m.text:
        return out
    for node in ast.walk(m.tree) if m.tree is not None else ():
        if isinstance(node, ast.Call) and call_name(node) in ("click.option", "option", "click.argument", "argument"):
            words = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if not words:
                continue
            flags = tuple(w for w in words if w.startswith("-"))
            plain = [w for w in words if not w.startswith("-")]
            dest = plain[0] if plain else (flags[0].lstrip("-").split("/")[0].replace("-", "_") if flags else "")
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            out.append(Option(tuple(f.split("/")[0] for f in flags), dest,
                              const(kw["default"]) if "default" in kw else None, "click", m.rel, node.lineno,
                              switch=const(kw.get("is_flag")) is True or any("/" in f for f in flags)))
    return out


def _configurator(m: Module) -> list[Option]:
    """nanoGPT's style: every module-level `name = constant` before the exec of configurator.py is `--name=`."""
    out = []
    for node in m.tree.body:
        if any(isinstance(n, ast.Constant) and n.value == "configurator.py" for n in ast.walk(node)):
            break  # what is set after the exec is not overridable
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Constant) and not node.targets[0].id.startswith("_"):
            name = node.targets[0].id
            out.append(Option((f"--{name}",), name, node.value.value, "configurator", m.rel, node.lineno))
    return out


def _cfgnode(script: Module, modules: list[Module]) -> list[Option]:
    """minGPT's CfgNode: `C.sec.key = v` in get_config(), and `C.sec = Cls.get_default_config()` pulls in the
    keys `Cls.get_default_config()` sets (in the script or the project's modules)."""
    defaults = {}  # class name -> [(key, value, module, line)]
    for m in modules:
        for cls in (n for n in ast.walk(m.tree) if isinstance(n, ast.ClassDef)) if m.tree is not None else ():
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "get_default_config":
                    defaults[cls.name] = [(k, v, m, ln) for k, v, ln in _cfg_sets(fn)]
    out = []
    for fn in (n for n in ast.walk(script.tree) if isinstance(n, ast.FunctionDef) and n.name == "get_config"):
        for key, value, line in _cfg_sets(fn):
            if isinstance(value, ast.Call) and call_name(value).endswith(".get_default_config"):
                cls = call_name(value).split(".")[-2]
                out += [Option((f"--{key}.{k}",), f"{key}.{k}", const(v), "cfgnode", mm.rel, ln)
                        for k, v, mm, ln in defaults.get(cls, [])]
            elif not (isinstance(value, ast.Call) and call_name(value) in ("CN", "CfgNode")):
                out.append(Option((f"--{key}",), key, const(value), "cfgnode", script.rel, line))
    seen: dict[str, Option] = {}
    for o in out:  # a later assignment (get_config overriding a class default) wins, as at run time
        seen[o.dest] = o
    return list(seen.values())


def _cfg_sets(fn: ast.FunctionDef) -> list[tuple[str, ast.AST, int]]:
    """(dotted key below the config object, value node, line) of every `C.a.b = value` in the function."""
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Attribute):
            parts, t = [], node.targets[0]
            while isinstance(t, ast.Attribute):
                parts.append(t.attr)
                t = t.value
            if isinstance(t, ast.Name):
                out.append((".".join(reversed(parts)), node.value, node.lineno))
    return out

