"""Probe: does the job's script compile, and do its imports load? Runs in the TRAINING interpreter.

Standard library only, and plain enough for any Python 3 the job might use. It is given (as JSON in the file $DFDOCTOR_PROBE_IN)
what the launch would run: a script, a module (`-m`) or code (`-c`), plus the sys.path[0] and sys.argv the
launch would have. It

1. compiles the main file and every local module reachable through imports (a syntax error anywhere there is
   reported with file, line and caret);
2. executes, in order, only the main file's module-level import statements and the statements that prepare
   them (`sys.path.insert(...)`, `os.environ[...] = ...`, `ROOT = Path(__file__).parent`): never its main body;
3. reports each import's outcome and time. Before each import it prints a marker line to stderr, so when
   dfdoctor's faulthandler deadline fires (all threads' stacks go to stderr) the hanging import is known.
"""

import ast
import faulthandler
import importlib
import importlib.util
import os
import re
import stat
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE in sys.path:  # the probe's own folder must not shadow the job's modules
    sys.path.remove(HERE)
sys.path.insert(0, HERE)
from _probe_support import answer, install_stack_dump, request  # noqa: E402
import _near  # noqa: E402

sys.path.remove(HERE)

MARK = "[dfdoctor-import]"
MAX_LOCAL_FILES = 400
TB_TAIL_LINES = 25
MAX_OWN_FRAMES = 30  # the job's own frames kept above the tail (a deep recursion of its own keeps its last ones)
# Names a module-level assignment may use and still count as "preparing imports" (so it is safe to run).
SAFE_NAMES = {"os", "sys", "Path", "pathlib", "__file__", "str", "abspath", "dirname", "join", "realpath",
              "osp", "path", "PurePath", "expanduser", "resolve", "parent", "parents", "int", "float", "bool"}


def main():
    """Read the launch description, compile, import, answer."""
    spec = request()
    install_stack_dump()
    faulthandler.enable(file=sys.stderr, all_threads=True)  # a segfaulting extension leaves its stack
    hang_s = float(spec.get("hang_s") or 0)
    if hang_s > 0:
        # At the deadline: print every thread's stack to stderr and exit, so the hang becomes evidence.
        faulthandler.dump_traceback_later(hang_s, exit=True)
    out = {"python": sys.version.split()[0], "executable": sys.executable, "syntax_errors": [],
           "imports": [], "compiled": [], "notes": []}
    path0 = spec.get("path0")
    if path0 is None:  # computed here, where the job runs (the target may be another machine)
        script = spec.get("script")
        if script and not os.path.exists(script):
            out["not_found"] = script
            out["cwd"] = os.getcwd()  # where a relative one was looked for, for the finding to say
            faulthandler.cancel_dump_traceback_later()
            answer(out)
            return
        # Python puts the script's folder (symlinks resolved) first on sys.path; for -m and -c, the cwd.
        path0 = os.path.dirname(os.path.realpath(script)) if script else os.getcwd()
    out["path0"] = path0
    sys.path.insert(0, path0)
    sys.argv = list(spec.get("argv") or [""])
    main_file, source, package = locate_main(spec, out)
    if main_file is None:
        faulthandler.cancel_dump_traceback_later()
        answer(out)
        return
    if main_file.endswith((".zip", ".pyz", ".pyc")):
        out["notes"].append("%s is not Python source; only that it exists was checked" % main_file)
        faulthandler.cancel_dump_traceback_later()
        answer(out)
        return
    tree = compile_file(main_file, source, out)
    files = follow_local(tree, main_file, package, path0, out) if tree is not None else []
    if out["syntax_errors"]:
        faulthandler.cancel_dump_traceback_later()
        answer(out)  # the launch dies compiling; importing would only repeat it
        return
    guard_writes([path0, os.getcwd()])  # the imports run the project's module-level code: none of it may write
    for name in spec.get("pre_imports") or []:
        run_import(out, name, None, None, "import %s (by the launcher itself)" % name, "required",
                   lambda n=name: importlib.import_module(n))
    if tree is not None:
        run_module_imports(tree, main_file, package, out)
    GUARD["on"] = False
    out["lazy_missing"] = lazy_missing(files, path0)
    faulthandler.cancel_dump_traceback_later()
    answer(out)


class NotWritten(PermissionError):
    """A write of the job's import-time code that the check refused (a check never writes the user's files)."""


GUARD = {"on": False}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_CHANGES = ("os.remove", "os.rmdir", "os.truncate", "shutil.rmtree", "os.chmod", "os.chown", "os.utime")


def guard_writes(roots):
    """From here on, this process may not write, truncate, delete, rename or touch a file that exists, nor create
    anything in the job's own folders (`roots`): a module whose import runs `logging.basicConfig(filename=
    'train.log', filemode='w')` would empty the last run's log during `check`. Such a call raises NotWritten where
    it is made; the import then fails with it and is reported as not judged. A new file elsewhere (a library's
    cache) goes through. Python 3.8+ (audit hooks: PEP 578); C code writing on its own is not seen."""
    if not hasattr(sys, "addaudithook"):
        return
    home = os.path.realpath(os.path.expanduser("~"))
    roots = {os.path.realpath(r) for r in roots if r} - {home, "/"}
    made = set()  # what this process created itself, under the guard: its own to change again
    own = os.environ.get("DFDOCTOR_PROBE_OUT") or ""

    def inside(path):
        real = os.path.realpath(path)
        return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)

    def ours(path):  # created under the guard, or inside a folder that was (a TemporaryDirectory)
        real = os.path.realpath(path)
        return any(real == m or real.startswith(m.rstrip(os.sep) + os.sep) for m in made)

    def new_file(path):
        if ours(path):
            return True
        if os.path.lexists(path) or inside(path):
            return False
        made.add(os.path.realpath(path))
        return True

    def refuse(path, what):
        raise NotWritten(13, "dfdoctor's check lets no import %s" % what, path)

    def hook(event, args):
        if not GUARD["on"] or event not in _EVENTS or not args or isinstance(args[0], int):
            return
        path = _at(args[0], args[-1] if event in _CHANGES + ("os.rename",) else None)
        if own and (path == own or path.startswith(own + ".")) or _a_device(path):
            return
        if event == "open":
            if (args[2] or 0) & _WRITE_FLAGS or isinstance(args[1], str) and any(c in args[1] for c in "wax+"):
                if not new_file(path):
                    refuse(path, "write %s" % path)
        elif event in ("os.rename", "os.link", "os.symlink"):
            dest = _at(args[1], args[3] if event == "os.rename" else None) if not isinstance(args[1], int) else ""
            if event == "os.rename" and not ours(path) or dest and not new_file(dest):
                refuse(dest or path, "move or link onto %s" % (dest or path))
        elif event == "os.mkdir":
            if not os.path.lexists(path) and not new_file(path):  # an existing one: mkdir fails by itself
                refuse(path, "create %s" % path)
        elif not ours(path):
            refuse(path, "change or remove %s" % path)

    GUARD["on"] = True
    sys.addaudithook(hook)


_EVENTS = {"open", "os.rename", "os.link", "os.symlink", "os.mkdir"} | set(_CHANGES)


def _at(path, dir_fd):
    """A path an audited call names, relative to its dir_fd where it has one (shutil.rmtree's unlinks)."""
    path = os.fsdecode(path)
    if isinstance(dir_fd, int) and not os.path.isabs(path):
        try:
            return os.path.join(os.readlink("/proc/self/fd/%d" % dir_fd), path)
        except OSError:
            pass
    return path


def _a_device(path):
    """/dev/null, a terminal, a pipe: writing there changes no file."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode) and not stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def locate_main(spec, out):
    """The file (and its source) the launch would run as __main__, or None when it cannot be found."""
    if spec.get("code") is not None:
        return "<string>", spec["code"], ""
    if spec.get("module"):
        mod = spec["module"]
        t0 = time.time()
        print(MARK, "start", mod, flush=True, file=sys.stderr)
        try:
            found = importlib.util.find_spec(mod)  # imports the parent packages, as `python -m` does
        except BaseException as exc:  # noqa: B902 - a parent package failing is exactly what we report
            out["imports"].append(failure(mod, None, None, "-m " + mod, "required", exc, time.time() - t0))
            return None, None, None
        if found is None:
            exc = ModuleNotFoundError("No module named %r" % mod, name=mod)
            out["imports"].append(failure(mod, None, None, "-m " + mod, "required", exc, time.time() - t0))
            return None, None, None
        if found.submodule_search_locations is not None:  # a package: `python -m pkg` runs pkg.__main__
            mod = mod + ".__main__"
            found = importlib.util.find_spec(mod)
            if found is None:
                exc = ModuleNotFoundError("No module named %r (the package has no __main__)" % mod, name=mod)
                out["imports"].append(failure(mod, None, None, "-m " + spec["module"], "required", exc, 0.0))
                return None, None, None
        origin = found.origin
        if not origin or not origin.endswith(".py") or not os.path.isfile(origin):
            out["notes"].append("%s is not a Python source file (%s); only its import was checked" % (mod, origin))
            return None, None, None
        return origin, read(origin), mod.rpartition(".")[0]
    script = spec["script"]
    if os.path.isdir(script):
        script = os.path.join(script, "__main__.py")
    return script, read(script), ""


def read(path):
    """A source file's text, decoded as Python would (PEP 263 coding cookies included)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        import io
        import tokenize
        enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(enc)
    except (SyntaxError, LookupError, UnicodeDecodeError) as exc:
        return exc


def compile_file(path, source, out):
    """Compile one file as Python will (its text, not its AST: compiling a tree recurses through it, and a valid
    1,500-term concatenation overflows that); record a syntax error (file, line, caret); return its AST or None.
    A file this interpreter cannot compile or parse for want of stack (RecursionError) is a note, "could not
    check": it proves nothing about the job."""
    out["compiled"].append(path)
    if isinstance(source, Exception):
        out["syntax_errors"].append({"file": path, "line": 1, "offset": None, "text": "", "msg": str(source)})
        return None
    try:
        compile(source, path, "exec", dont_inherit=True)
        return ast.parse(source, path)
    except SyntaxError as exc:
        out["syntax_errors"].append({"file": exc.filename or path, "line": exc.lineno, "offset": exc.offset,
                                     "end_offset": getattr(exc, "end_offset", None),
                                     "text": (exc.text or "").rstrip("\n"), "msg": exc.msg})
    except ValueError as exc:  # null bytes: Python refuses the file too
        out["syntax_errors"].append({"file": path, "line": 1, "offset": None, "text": "", "msg": str(exc)})
    except (RecursionError, MemoryError) as exc:
        out["notes"].append("%s could not be checked: reading it overflowed this probe (%s: %s)"
                            % (path, type(exc).__name__, exc))
    return None


def imported_names(tree, package):
    """Every module a file imports (absolute names, relative ones resolved), with line numbers; not those of a
    branch this interpreter never takes (`if sys.version_info >= (3, 12):` on 3.11: version_dead)."""
    found = []
    dead = version_dead(tree)
    for node in ast.walk(tree):
        if id(node) in dead:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((alias.name, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = resolve_relative(node.module, node.level, package)
            if base is None:
                continue
            found.append((base, node.lineno))
            for alias in node.names:  # `from pkg import submodule` may name a module
                if alias.name != "*":
                    found.append((base + "." + alias.name if base else alias.name, node.lineno))
    return found


def version_dead(tree):
    """The ids of the statements (and what they hold) under an `if` on the interpreter's version or platform
    (`sys.version_info >= (3, 12)`, `sys.platform == "win32"`) in the branch this interpreter never takes: a
    module imported only there is never compiled by this Python, whatever syntax it uses."""
    dead = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.If) or not is_version_test(node.test):
            continue
        try:
            taken = bool(eval(compile(ast.Expression(body=node.test), "<guard>", "eval"), {"sys": sys}))
        except Exception:  # noqa: BLE001 - a test that raises here is one we cannot judge: both branches count
            continue
        for stmt in (node.orelse if taken else node.body):
            dead.update(id(n) for n in ast.walk(stmt))
    return dead


def is_version_test(test):
    """A test that reads only `sys.version_info`/`sys.platform` and constants, compared."""
    saw = False
    for n in ast.walk(test):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "sys":
            if n.attr not in ("version_info", "platform", "hexversion"):
                return False
            saw = True
        elif isinstance(n, ast.Name) and n.id != "sys":
            return False
        elif isinstance(n, (ast.Call, ast.Lambda, getattr(ast, "NamedExpr", ast.Lambda))):
            return False
    return saw


def resolve_relative(module, level, package):
    """`from ..x import y` inside `package` → the absolute module name, or None if it climbs too high."""
    if not level:
        return module or ""
    parts = package.split(".") if package else []
    if level - 1 > len(parts) or not parts:
        return None
    base = parts[: len(parts) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def local_file(name, root):
    """The file under `root` that module `name` would load from, or None if it is not a local module."""
    rel = os.path.join(root, *name.split("."))
    for cand in (rel + ".py", os.path.join(rel, "__init__.py")):
        if os.path.isfile(cand):
            return cand
    return None


def follow_local(tree, main_file, package, root, out):
    """Compile every local module reachable from the main file through imports (any depth, any scope).

    Returns (file, tree, package) for the main file and every local module that compiled.
    """
    seen = {os.path.abspath(main_file)}
    todo = [(tree, package)]
    files = [(main_file, tree, package)]
    while todo and len(seen) < MAX_LOCAL_FILES:
        t, pkg = todo.pop()
        for name, _ in imported_names(t, pkg):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):  # pkg/__init__.py, pkg/sub/__init__.py, pkg/sub/mod.py
                sub = ".".join(parts[:i])
                f = local_file(sub, root)
                if f is None or os.path.abspath(f) in seen:
                    continue
                seen.add(os.path.abspath(f))
                subtree = compile_file(f, read(f), out)
                if subtree is not None:
                    is_pkg = f.endswith("__init__.py")
                    todo.append((subtree, sub if is_pkg else sub.rpartition(".")[0]))
                    files.append((f, subtree, sub if is_pkg else sub.rpartition(".")[0]))
    return files


def function_imports(tree):
    """Absolute imports that run only when a function is called, unguarded by try/except ImportError: (name,
    line, the line of the innermost `if` inside the function they sit under, or None). An `if` never true at run
    time (TYPE_CHECKING) or a branch this interpreter never takes (a test on its version or platform) hides its
    imports; any other `if` only makes them conditional: the check says whether this launch reaches them."""
    found = []

    def visit(nodes, in_func, guarded, under):
        """Walk statements, noting whether we are in a function, under a guard, and under which `if`."""
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(node.body, True, guarded, None)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                if in_func and not guarded:
                    if isinstance(node, ast.Import):
                        found.extend((a.name, node.lineno, under) for a in node.names)
                    elif not node.level and node.module:
                        found.append((node.module, node.lineno, under))
            elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                visit(node.body, in_func, guarded or handles_import_error(node), under)
                for h in node.handlers:
                    visit(h.body, in_func, True, under)
                visit(node.orelse + node.finalbody, in_func, guarded, under)
            elif isinstance(node, ast.If):
                visit(live_branches(node), in_func, guarded, node.lineno if in_func else under)
            else:
                for attr in ("body", "orelse", "finalbody"):
                    inner = getattr(node, attr, None)
                    if isinstance(inner, list):
                        visit(inner, in_func, guarded, under)

    visit(tree.body, False, False, None)
    return found


def live_branches(node):
    """The statements of an `if` that can run here: none of `if TYPE_CHECKING:`'s body, only the branch this
    interpreter takes of a test on its version or platform, both branches of any other test."""
    if is_type_checking(node.test):
        return node.orelse
    if is_version_test(node.test):
        try:
            taken = bool(eval(compile(ast.Expression(body=node.test), "<guard>", "eval"), {"sys": sys}))
        except Exception:  # noqa: BLE001 - a test that raises here is one we cannot judge: both branches count
            return node.body + node.orelse
        return node.body if taken else node.orelse
    return node.body + node.orelse


def lazy_missing(files, root):
    """Imports inside functions whose top-level package cannot be found at all (checked without importing)."""
    missing = []
    for path, tree, _pkg in files:
        for name, line, under in function_imports(tree):
            top = name.split(".")[0]
            if top in sys.modules or top in sys.builtin_module_names or local_file(top, root):
                continue
            try:
                found = importlib.util.find_spec(top)
            except (ImportError, ValueError):
                found = None
            if found is None:
                missing.append({"name": name, "missing": top, "file": path, "line": line,
                                "text": source_line(path, line), "near": safe_near(_near.near_module, top),
                                "under": {"line": under, "text": source_line(path, under)} if under else None})
    return missing


def run_module_imports(tree, main_file, package, out):
    """Execute the main file's module-level imports (and what prepares them) in order, never its body."""
    ns = {"__name__": "__dfdoctor_smoke__", "__file__": main_file, "__package__": package or None,
          "__builtins__": __builtins__, "__spec__": None}
    if main_file != "<string>":
        ns["__file__"] = os.path.abspath(main_file)
    for node, kind in import_plan(tree.body, "required", ns, main_file, out):
        code = compile(ast.Module(body=[node], type_ignores=[]), main_file, "exec")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            text = source_line(main_file, node.lineno)
            name = import_label(node, package)
            run_import(out, name, main_file, node.lineno, text, kind, lambda c=code: exec(c, ns))
        else:
            try:
                exec(code, ns)
            except NameError as exc:  # it needs a name a statement we did not run defines: no verdict
                out["notes"].append("%s:%d: %s: %s (a statement run before the imports)"
                                    % (main_file, node.lineno, type(exc).__name__, exc))
            except BaseException as exc:  # noqa: B902 - e.g. os.environ["LOCAL_RANK"]: the job dies here too
                text = source_line(main_file, node.lineno)
                if kind != "required":
                    # Under a guard we could not judge, the launch may never run it, or run it where what it
                    # reads is set: nothing here justifies a warning.
                    out["notes"].append("%s:%d: module-level code `%s` raised %s: %s here, under a guard "
                                        "dfdoctor could not judge; not reported" % (main_file, node.lineno, text,
                                                                                    type(exc).__name__, exc))
                    continue
                item = failure(text, main_file, node.lineno, text, kind, exc, 0.0)
                item["statement"] = True
                item["reads_env"] = "environ" in text or "getenv" in text
                out["imports"].append(item)


def import_plan(body, kind, ns=None, main_file="", out=None):
    """Module-level import statements with how much a failure matters, plus the statements preparing them.

    'required': runs unconditionally (or under `if __name__ == "__main__"`); 'optional': inside a `try`
    that handles ImportError (the script copes); 'conditional': under some other `if`.

    A guard is judged by its own condition where that can be evaluated safely with what ran so far (`ddp =
    int(os.environ.get('RANK', -1)) != -1`, then `if ddp:`): the branch it takes here runs as the code around
    it; the branch it does not take only has its imports tried (as 'conditional'), never its other statements,
    which run where the guard holds (RANK set) and would only fail here for want of what the guard promises.
    The plan is a generator consumed statement by statement, so `ns` holds what ran before each guard.
    """
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, kind
        elif isinstance(node, ast.If):
            if is_main_guard(node.test):
                for item in import_plan(node.body, kind, ns, main_file, out):
                    yield item
            elif is_type_checking(node.test):
                continue
            else:
                held = judge_guard(node.test, ns)
                weaker = "conditional" if kind == "required" else kind
                if held is None:
                    for item in import_plan(node.body + node.orelse, weaker, ns, main_file, out):
                        yield item
                    continue
                taken, other = (node.body, node.orelse) if held else (node.orelse, node.body)
                if out is not None:
                    out["notes"].append("%s:%d: `if %s` is %s here: %s" % (
                        main_file, node.lineno, source_line(main_file, node.lineno)[3:].rstrip(":").strip(),
                        "true" if held else "false", "its branch ran" if held else
                        "only the imports of its branch were tried"))
                for item in import_plan(taken, kind, ns, main_file, out):
                    yield item
                if is_version_test(node.test):
                    continue  # the other branch is for another Python or platform: this one never runs it
                guard = source_line(main_file, node.lineno).rstrip(":")
                for item in import_plan(other, weaker, ns, main_file, out):
                    if isinstance(item[0], (ast.Import, ast.ImportFrom)):
                        if out is not None:
                            out.setdefault("guards", {})[str(item[0].lineno)] = "`%s` (%s here)" % (
                                guard, "true" if held else "false")
                        yield item
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            inner = "optional" if handles_import_error(node) else kind
            for item in import_plan(node.body, inner, ns, main_file, out):
                yield item
        elif is_preparation(node):
            yield node, kind


GUARD_CALLS = {"int", "float", "bool", "str", "len", "get", "getenv", "exists", "isfile", "isdir", "lower",
               "upper", "startswith", "endswith", "strip"}


def judge_guard(test, ns):
    """The guard's truth here (True/False), evaluated on what already ran, or None when it cannot be judged
    safely: it names something not yet defined, or calls anything beyond reading the environment and paths."""
    if ns is None:
        return None
    for n in ast.walk(test):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.id if isinstance(f, ast.Name) else (f.attr if isinstance(f, ast.Attribute) else None)
            if name not in GUARD_CALLS:
                return None
        elif isinstance(n, ast.Name) and n.id not in ns and n.id not in SAFE_NAMES:
            return None
        elif isinstance(n, (ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            return None
    try:
        return bool(eval(compile(ast.Expression(body=test), "<guard>", "eval"), dict(ns)))
    except Exception:  # noqa: BLE001 - a guard that raises here is one we cannot judge
        return None


def is_main_guard(test):
    """`if __name__ == "__main__":`"""
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and any(getattr(c, "value", getattr(c, "s", None)) == "__main__" for c in test.comparators))


def is_type_checking(test):
    """`if TYPE_CHECKING:` / `if typing.TYPE_CHECKING:`: never true at run time."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def handles_import_error(node):
    """Does this `try` catch ImportError (or something broader)?"""
    for h in node.handlers:
        if h.type is None:
            return True
        names = [h.type] if not isinstance(h.type, ast.Tuple) else list(h.type.elts)
        for n in names:
            ident = n.id if isinstance(n, ast.Name) else (n.attr if isinstance(n, ast.Attribute) else "")
            if ident in ("ImportError", "ModuleNotFoundError", "Exception", "BaseException"):
                return True
    return False


# Helpers that find the project's root by a marker file and put it on sys.path (lightning-hydra-template's
# `rootutils.setup_root(__file__, indicator=".project-root", pythonpath=True)`): the job imports `src.x` only after.
ROOT_SETUP = {"setup_root", "set_root"}


def sets_up_root(value):
    """`rootutils.setup_root(...)` / `pyrootutils.setup_root(...)` (a call, or its result assigned)."""
    if not isinstance(value, ast.Call):
        return False
    f = value.func
    name = f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")
    owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
    return name in ROOT_SETUP and (owner.endswith("rootutils") or not owner)


def is_preparation(node):
    """Statements that set up imports and are safe to run: sys.path edits, env settings, path constants, and a
    root-finding helper's call."""
    if isinstance(node, (ast.Expr, ast.Assign)) and sets_up_root(node.value):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        f = node.value.func
        target = ast.dump(f)
        if isinstance(f, ast.Attribute) and f.attr in ("insert", "append", "extend") and "'path'" in target \
                and "'sys'" in target:
            return True
        if isinstance(f, ast.Attribute) and f.attr in ("setdefault", "update") and "'environ'" in target:
            return True
        return False
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Subscript) and "'environ'" in ast.dump(t.value) for t in targets):
            return only_constants(node.value)
        if all(isinstance(t, ast.Name) for t in targets) and isinstance(node, ast.Assign):
            return uses_only_safe_names(node.value)
        if isinstance(node, ast.AugAssign) and "'path'" in ast.dump(node.target):
            return uses_only_safe_names(node.value)
    return False


def only_constants(node):
    """True for literals (and str/int/f-strings of literals)."""
    return all(not isinstance(n, (ast.Call, ast.Name, ast.Attribute)) or
               (isinstance(n, ast.Name) and n.id in ("str", "int")) for n in ast.walk(node))


def uses_only_safe_names(node):
    """True when an expression only touches os/sys/pathlib/__file__ (so evaluating it has no side effects)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id not in SAFE_NAMES and not n.id.isupper():
            return False
        if isinstance(n, (ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
    return True


def import_label(node, package):
    """The module an import statement loads, for the report."""
    if isinstance(node, ast.Import):
        return ", ".join(a.name for a in node.names)
    base = resolve_relative(node.module, node.level, package)
    return base if base else "." * node.level + (node.module or "")


def source_line(path, lineno):
    """The text of one line of a file ('' if unreadable)."""
    try:
        import linecache
        return linecache.getline(path, lineno).strip()
    except Exception:  # noqa: BLE001 - best effort
        return ""


def run_import(out, name, file, line, text, kind, fn):
    """Run one import, timing it; record ok or the failure."""
    print(MARK, "start", name, "%s:%s" % (file, line) if file else "", flush=True, file=sys.stderr)
    t0 = time.time()
    try:
        fn()
    except BaseException as exc:  # noqa: B902 - SystemExit and KeyboardInterrupt at import time count too
        out["imports"].append(failure(blamed(name), file, line, text, kind, exc, time.time() - t0))
    else:
        out["imports"].append({"name": name, "file": file, "line": line, "text": text, "kind": kind,
                               "status": "ok", "seconds": round(time.time() - t0, 3)})
    print(MARK, "done", name, flush=True, file=sys.stderr)


def blamed(label):
    """Of `import os, time, torch` that failed, the module that did: Python imports them in order and stops at
    the first that raises, so it is the first not loaded (os and time are in sys.modules, torch is not). A
    module that needs a missing one is then named alone, never the statement's other modules."""
    names = label.split(", ")
    return next((n for n in names if n not in sys.modules), label) if len(names) > 1 else label


def kept_traceback(frames, exc):
    """The traceback as Python prints it, bounded: its header, every frame of the job's own code (the line of the
    user's that led into a library: hellaswag.py:62 above thirty frames of requests), and its last lines; the
    library frames between them are counted, not kept."""
    texts = traceback.format_list(frames)
    last = traceback.format_exception_only(type(exc), exc)
    budget = TB_TAIL_LINES - sum(t.count("\n") for t in last)
    tail = len(texts)
    while tail > 0 and budget - texts[tail - 1].count("\n") >= 0:
        tail -= 1
        budget -= texts[tail].count("\n")
    tail = min(tail, len(texts) - 1) if texts else 0  # the innermost frame, whatever its length
    own = [i for i in range(tail) if not _library_file(frames[i].filename)][-MAX_OWN_FRAMES:]
    out = ["Traceback (most recent call last):\n"]
    shown = 0
    for i in own + list(range(tail, len(texts))):
        if i > shown:
            out.append("  [... %d frame(s) of installed packages or the standard library ...]\n" % (i - shown))
        out.append(texts[i])
        shown = i + 1
    return "".join(out + last).rstrip("\n")


def _library_file(path):
    """A frame of installed packages or the standard library (as dfdoctor's traceback reader tells them)."""
    path = path.replace("\\", "/")
    return "site-packages/" in path or "dist-packages/" in path or path.startswith("<") or \
        re.search(r"/lib/python3\.?\d*/", path, re.IGNORECASE) is not None


def failure(name, file, line, text, kind, exc, seconds):
    """Describe a failed import: which module is missing or what raised, and where."""
    all_frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__]
    frames = [f for f in all_frames if "importlib._bootstrap" not in f.filename]
    where = None
    if frames:
        f = frames[-1]
        where = {"file": f.filename, "line": f.lineno, "text": (f.line or "").strip()}
    status = "error"
    if isinstance(exc, NotWritten):
        status = "refused"
        own = [f for f in frames if not _library_file(f.filename)]
        if own:  # the project's line that led to the write (logging.basicConfig's own frame is the library's)
            where = {"file": own[-1].filename, "line": own[-1].lineno, "text": (own[-1].line or "").strip()}
    elif isinstance(exc, ModuleNotFoundError):
        status = "missing"
    elif isinstance(exc, SyntaxError):
        status = "syntax"
    d = {"name": name, "file": file, "line": line, "text": text, "kind": kind, "status": status,
         "exception": type(exc).__name__, "message": str(exc), "missing": getattr(exc, "name", None),
         "refused": getattr(exc, "filename", None) if isinstance(exc, NotWritten) else None,
         "where": where, "traceback": kept_traceback(all_frames, exc), "seconds": round(seconds, 3)}
    d.update(near_names(exc, status))
    if isinstance(exc, SyntaxError):
        d["syntax"] = {"file": exc.filename, "line": exc.lineno, "offset": exc.offset,
                       "text": (exc.text or "").rstrip("\n"), "msg": exc.msg}
    return d


def near_names(exc, status):
    """What is installed close to a module that is not found, or to a name a module does not define: a typo's
    answer (`torchh` is `torch`), observed here, where the job's imports are."""
    if status == "missing" and getattr(exc, "name", None):
        return {"near": safe_near(_near.near_module, exc.name)}
    m = CANNOT_IMPORT.match(str(exc)) if type(exc) is ImportError else None
    if m:
        return {"near_name": safe_near(_near.near_name, m.group(2), m.group(1))}
    return {}


CANNOT_IMPORT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")


def safe_near(fn, *args):
    """The near names, or None when looking raised: a suggestion is never worth a failed probe."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001
        return None


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # a thread an imported module started must not keep the probe alive
