"""`launch` and `status` load only the built-in checks that run after a launch (registry.BUILT_IN_POST): the same
checks as loading them all and selecting that phase, without importing the others' modules; a plugin that takes
a built-in check's id is named whether that built-in was loaded or not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dfdoctor.registry import BUILT_IN_OTHER_SCOPES, BUILT_IN_POST, discover, select

ASK = r"""
import json, sys
from dfdoctor.registry import discover, select
phase = sys.argv[1] or None
checks, broken = discover(phase)
print(json.dumps({"post": sorted(c.id for c in select(checks, phase="post")),
                  "broken": sorted((b.name, b.source, b.error) for b in broken),
                  "modules": sorted(m for m in sys.modules if m.startswith("dfdoctor.checks."))}))
"""


def _ask(phase: str, env: dict | None = None) -> dict:
    out = subprocess.run([sys.executable, "-c", ASK, phase], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_table_names_every_built_in_check_that_runs_after_a_launch():
    checks, _ = discover()
    assert BUILT_IN_POST == {c.id for c in checks if c.source == "built-in" and "post" in c.phases}


def test_the_table_names_every_built_in_check_of_another_scope_and_scope_any_leaves_them_unloaded():
    checks, _ = discover()
    assert BUILT_IN_OTHER_SCOPES == {c.id for c in checks if c.source == "built-in" and c.scope != "any"}
    anys, _ = discover(scope="any")
    assert {c.id for c in anys} == {c.id for c in checks if c.scope == "any"}


def test_the_post_checks_load_without_importing_the_other_built_in_checks():
    every, post = _ask(""), _ask("post")
    assert post["post"] == every["post"] == sorted(c.id for c in select(discover()[0], phase="post"))
    assert post["broken"] == every["broken"] == []
    pre_only = {"dfdoctor.checks.launch_path", "dfdoctor.checks.compile_race", "dfdoctor.checks.cuda_nccl",
                "dfdoctor.checks.deps_requirements", "dfdoctor.checks.imports_smoke"}
    assert pre_only <= set(every["modules"])  # loading them all imports them
    assert not pre_only & set(post["modules"]), post["modules"]


def test_a_plugin_taking_a_built_in_checks_id_is_named_whether_the_built_in_was_loaded_or_not(tmp_path: Path):
    site = tmp_path / "site"
    dist = site / "dfdoctor_thief-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dfdoctor-thief\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[dfdoctor.checks]\nargs.known = thief:args_known\n"
                                           "job.resources = thief:job_resources\n")
    (site / "thief.py").write_text(
        "from dfdoctor import check\n\n"
        "@check('args.known', title='a pre check of its own', phases=('pre', 'post'))\n"
        "def args_known(ctx):\n    return None\n\n"
        "@check('job.resources', title='a post check of its own', phases=('post',))\n"
        "def job_resources(ctx):\n    return None\n")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    every, post = _ask("", env), _ask("post", env)
    taken = [b for b in every["broken"] if "is already provided by" in b[2]]
    assert {b[2].split()[2] for b in taken} == {"args.known", "job.resources"}, every["broken"]
    assert post["broken"] == every["broken"]
    assert post["post"] == every["post"]
