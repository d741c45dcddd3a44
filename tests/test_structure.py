"""The shape of the package: no import cycle among dfdoctor's modules, each one imports on its own, and whether
the target is this machine is asked of the parsed Target, never of the spec's spelling."""

from __future__ import annotations

import ast
import subprocess
import sys

from support import import_graph


def test_no_import_cycle_among_dfdoctor_modules():
    """Not at import time, and not through the imports inside functions either (where a cycle hides when it is
    dodged instead of broken)."""
    assert import_graph.cycles(import_graph.graph(top_only=True)) == []
    assert import_graph.cycles(import_graph.graph(top_only=False)) == []


def _crossings(src: str, dst: str) -> list[tuple[str, str]]:
    """The imports (at import time or inside functions) from a module of floor `src` to one of floor `dst`."""
    g, pk = import_graph.graph(top_only=False), import_graph.packages()
    return sorted((a, b) for a, deps in g.items() for b in deps
                  if import_graph.floor(a, pk) == src and import_graph.floor(b, pk) == dst)


def test_diagnose_reads_runs_through_run_and_never_imports_launch():
    """The verdict's rules read a run folder through `dfdoctor.run` (RunRecord, LiveFacts); launch/ uses diagnose/,
    never the other way round."""
    assert _crossings("dfdoctor.diagnose", "dfdoctor.launch") == []
    assert _crossings("dfdoctor.diagnose", "dfdoctor.run")  # the rule is about something real
    assert _crossings("dfdoctor.run", "dfdoctor.launch") == []
    assert _crossings("dfdoctor.run", "dfdoctor.diagnose") == []


def test_one_watch_loop_for_every_kind_of_job():
    """Issue 34: the loop of a watch is written once (dfdoctor.watch.loop) and asks the policy for its decisions;
    the watches of launch/ (this machine, a target) and slurm/ hand it a source and run no loop of their own. The
    loop imports no source (each is handed in)."""
    g, modules = import_graph.graph(top_only=False), import_graph.module_files()
    assert _crossings("dfdoctor.watch", "dfdoctor.launch") == []
    assert _crossings("dfdoctor.watch", "dfdoctor.slurm") == []
    deciders = sorted(n for n, path in modules.items() if ".decide(" in path.read_text() or "Decision." in
                      path.read_text())
    assert deciders == ["dfdoctor.watch.loop", "dfdoctor.watch.policy"], deciders
    assert {n for n, deps in g.items() if "dfdoctor.watch.loop" in deps} >= {"dfdoctor.launch.local",
                                                                           "dfdoctor.slurm.watch"}


def test_no_import_cycle_between_floors():
    """Each subpackage as one node (a floor), each module of the top package as another: no two floors import each
    other, directly or around a loop (before round 6: diagnose <-> launch <-> runindex)."""
    g = import_graph.graph(top_only=False)
    assert import_graph.cycles(import_graph.floor_graph(g)) == []


def test_the_floor_graph_folds_subpackages():
    pk = {"dfdoctor", "dfdoctor.launch", "dfdoctor.checks", "dfdoctor.checks.probes"}
    assert import_graph.floor("dfdoctor.launch.local", pk) == "dfdoctor.launch"
    assert import_graph.floor("dfdoctor.checks.probes.x", pk) == "dfdoctor.checks.probes"
    assert import_graph.floor("dfdoctor.checks.cuda_init", pk) == "dfdoctor.checks"
    assert import_graph.floor("dfdoctor.engine", pk) == "dfdoctor.engine"


def test_the_cycle_finder_finds_a_cycle(tmp_path):
    """The finder itself: two modules that import each other inside functions are one cycle."""
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_graph.cycles(g) == [["a", "b", "c"]]


def test_every_module_imports_first_in_a_fresh_interpreter():
    """Whatever module a caller (a plugin, a test, the CLI) imports first, it loads: an import order that only
    works from one entry point is a cycle waiting to happen."""
    names = [n for n in import_graph.module_files()
             if not n.startswith(("dfdoctor.checks.probes", "dfdoctor.trainer")) and not n.endswith("__main__")]
    code = (
        "import importlib, sys\n"
        "bad = []\n"
        "for name in sys.argv[1:]:\n"
        "    for m in [m for m in sys.modules if m == 'dfdoctor' or m.startswith('dfdoctor.')]:\n"
        "        del sys.modules[m]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as exc:\n"
        "        bad.append(f'{name}: {type(exc).__name__}: {exc}')\n"
        "print('\\n'.join(bad))\n"
        "sys.exit(1 if bad else 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert len(names) > 50


def test_a_built_in_check_may_give_only_catalogued_cause_ids():
    """Through the real runner: a built-in check's unknown cause id becomes its `error` (a bug in it, said so);
    a plugin's own cause id passes as it is."""
    from dfdoctor import causes, fail
    from dfdoctor.context import Context
    from dfdoctor.registry import Check
    from dfdoctor.runner import run_checks

    def gives(cause):
        def func(ctx):
            yield fail("the log folder is missing", cause)
        return func

    built_in = [Check("t.known", "t", ("pre",), 10, gives(causes.LOG_DIR_MISSING)),
                Check("t.unknown", "t", ("pre",), 10, gives("log-folder-gone"))]
    known, unknown = run_checks(built_in, Context(), "pre")
    assert known.status.value == "fail" and known.cause == causes.LOG_DIR_MISSING
    assert unknown.status.value == "error" and unknown.cause is None
    assert "'log-folder-gone'" in unknown.summary and "the log folder is missing" in unknown.summary
    (plugin,) = run_checks([Check("p.own", "t", ("pre",), 10, gives("my-plugin-cause"), source="dfdoctor-x")],
                           Context(), "pre")
    assert plugin.status.value == "fail" and plugin.cause == "my-plugin-cause"


def test_verdict_state_is_an_enum_and_json_keeps_the_word():
    from dfdoctor.model import Verdict, VerdictState

    v = Verdict("failed", "log-dir-missing", "s")
    assert v.state is VerdictState.FAILED and v.state == "failed" and f"{v.state}" == "failed"
    assert v.to_dict()["state"] == "failed" and type(v.to_dict()["state"]) is str
    assert Verdict.from_dict(v.to_dict()) == v
    import pytest
    with pytest.raises(ValueError):
        Verdict("half-done")


# The one place the word `local` of a --target is read: the parser itself.
PARSES_THE_SPEC = ("dfdoctor.targets", "parse_target")


def _compares_with_local(tree: ast.AST, skip: str = "") -> list[int]:
    """The lines of `tree` that compare something with the text "local" (`==`, `!=`, `in`, `not in`, a tuple,
    list or set that holds it, nested too), outside the function named `skip`."""
    skipped = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == skip
               for n in ast.walk(f)}
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or id(node) in skipped:
            continue
        for side in (node.left, *node.comparators):
            words = ast.walk(side) if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            if any(isinstance(w, ast.Constant) and w.value == "local" for w in words):
                lines.append(node.lineno)
    return lines


def test_the_finder_of_compares_with_local_finds_them():
    src = ("a = ctx.target == 'local'\nb = spec not in (None, '', 'local')\nc = 'local' != t\n"
           "d = {'target': 'local'}\ne = x.get('target') or 'local'\nf = given in ((), ('local',))\n"
           "def parse_target(s):\n    return s == 'local'\n")
    assert _compares_with_local(ast.parse(src)) == [1, 2, 3, 6, 8]
    assert _compares_with_local(ast.parse(src), skip="parse_target") == [1, 2, 3, 6]


def test_whether_the_target_is_this_machine_is_asked_of_the_target():
    """`Context.target` is a parsed Target (issue #34): "is the job here?" is `target.runs_here`, one property with
    one meaning. A spec compared with "local" as text (20 places in 9 files before) misses `--target ' local'`
    and answers nothing about a kind that also runs here; only `parse_target` reads the word."""
    found = []
    for name, path in import_graph.module_files().items():
        skip = PARSES_THE_SPEC[1] if name == PARSES_THE_SPEC[0] else ""
        found += [f"{path.relative_to(import_graph.REPO)}:{line}"
                  for line in _compares_with_local(import_graph.tree_of(path), skip)]
    assert found == []
    assert _compares_with_local(ast.parse(import_graph.module_files()[PARSES_THE_SPEC[0]].read_text()))  # it is there


# The commands: they ask `dfdoctor.placements` where a job runs, and name no place themselves (issue 42).
COMMANDS = ("dfdoctor.cli.", "dfdoctor.stop")


def _places() -> tuple[set[str], set[str]]:
    """The words that name a place: each scheduler's name (its reference prefix, `slurm`) and each target kind's
    scheme but this machine's (`ssh`, `pct`, ...); and the modules that are a place's own (a scheduler's
    subpackage, `dfdoctor.slurm`; the kinds' modules, `dfdoctor.targets.kinds`)."""
    from dfdoctor import placements
    from dfdoctor.targets import KINDS, kind_for

    names = {p.name for p in placements.ALL if p.name}
    words = names | {s for s in KINDS if not kind_for(s).runs_here}
    return words, {f"dfdoctor.{n}" for n in names} | {"dfdoctor.targets.kinds"}


def _names_a_place(name: str, tree: ast.AST, words: set[str], own: set[str]) -> list[str]:
    """Where the module `name` (its `tree`) names a place: an import of a place's own module, an identifier that
    holds a place's word (`is_slurm`, `slurm_nodes`), or a text compared with one or tested as its prefix
    (`== "slurm"`, `.startswith("ray:")`, `in ("ssh", "pct")`)."""
    def wordy(text: str) -> bool:
        low = text.lower()
        return any(low == w or low.startswith((f"{w}:", f"{w}_")) or low.endswith(f"_{w}") or f"_{w}_" in low
                   or low.startswith(f"is_{w}") for w in words)

    def texts(node: ast.AST) -> list[str]:
        return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.ImportFrom) and node.module:
            full = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found += [f"{name}:{line}: imports {m}" for m in full
                      if any(m == o or m.startswith(f"{o}.") for o in own)][:1]
        elif isinstance(node, ast.Import):
            found += [f"{name}:{line}: imports {a.name}" for a in node.names
                      if any(a.name == o or a.name.startswith(f"{o}.") for o in own)]
        elif isinstance(node, ast.Name) and wordy(node.id) or isinstance(node, ast.Attribute) and wordy(node.attr):
            found.append(f"{name}:{line}: {getattr(node, 'id', None) or node.attr}")
        elif isinstance(node, ast.Compare):
            found += [f"{name}:{line}: compares {t!r}" for t in texts(node) if wordy(t)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("startswith", "endswith", "get", "__contains__"):
            found += [f"{name}:{line}: {node.func.attr}({t!r})" for a in node.args for t in texts(a) if wordy(t)]
        elif isinstance(node, ast.Subscript):
            found += [f"{name}:{line}: [{t!r}]" for t in texts(node.slice) if wordy(t)]
    return found


def test_the_finder_of_a_place_named_finds_them():
    src = ("from dfdoctor.slurm import nodes\nimport dfdoctor.targets.kinds.ssh\nif is_slurm(ctx): pass\n"
           "a = opts['slurm_nodes']\nb = ref.startswith('ray:')\nc = t.kind in ('ssh', 'pct')\n"
           "d = spec.get('slurm')\ne = kind == 'docker'\nf = 'slurm:4242 is an example'\ng = ctx.target.runs_here\n")
    words, own = {"slurm", "ray", "ssh", "pct", "docker"}, {"dfdoctor.slurm", "dfdoctor.targets.kinds"}
    assert sorted({int(f.split(":")[1]) for f in _names_a_place("m", ast.parse(src), words, own)}) == \
        [1, 2, 3, 4, 5, 6, 7, 8]


def test_no_command_names_a_scheduler_or_a_target_kind():
    """`check`, `launch`, `status` and `stop` ask the registry (`placements.of_line`, `of_ref`, `of_prefix`,
    `of_spec`) and hand what it gives to one pipeline: no cli module and no `dfdoctor.stop` imports a scheduler's
    package or a kind's module, calls a scheduler's own test (`is_slurm`), or compares a text with a place's name
    (before: `if slurm.is_slurm(ctx)` doors, a fallback path for this machine and the targets, and
    `check --slurm-nodes` handled in cli/main.py). Adding a placement is its subpackage and one line in ALL."""
    words, own = _places()
    assert {"slurm", "ray", "ssh", "pct", "lxc", "docker"} <= words  # the rule is about something real
    found = []
    for name, path in import_graph.module_files().items():
        if name.startswith(COMMANDS[0]) or name == COMMANDS[1]:
            found += _names_a_place(name, import_graph.tree_of(path), words, own)
    assert found == []


def test_every_scheduler_is_a_subpackage_with_one_registration():
    """A scheduler's placement lives in its own subpackage (`dfdoctor.NAME.placement`), registered once in ALL;
    this machine and the targets are the two placements of the recorder (`dfdoctor.launch.places`), last."""
    from dfdoctor import placements

    named = [p for p in placements.ALL if p.name]
    assert [type(p).__module__ for p in named] == [f"dfdoctor.{p.name}.placement" for p in named]
    assert len({p.name for p in named}) == len(named) >= 2
    assert [type(p).__module__ for p in placements.ALL[len(named):]] == ["dfdoctor.launch.places"] * 2
