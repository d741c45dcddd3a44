"""The launcher walk: what it knows exactly after each shell construct, and what it leaves unknown."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dfdoctor.launchline.commandline import parse
from dfdoctor.launchline.expand import Scope, Unknown, expand


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print(1)\n")
    return tmp_path


def env(**extra: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": "/root", **extra}


def walk(proj: Path, text: str, *argv: str, shell: str = "bash", **extra: str):
    (proj / "go.sh").write_text(text)
    return parse([shell, "go.sh", *argv], proj, env(**extra))


def test_cd_sets_oldpwd_and_dfdoctors_own_is_never_used(proj: Path) -> None:
    s = walk(proj, f'cd {proj / "src"} && exec python3 "$OLDPWD/train.py"\n', OLDPWD="/somewhere/else")
    assert s.script == proj / "train.py" and s.cwd == proj / "src" and s.resolved
    s = walk(proj, 'exec python3 "$OLDPWD/train.py"\n', OLDPWD=str(proj / "src"))
    assert s.script is None and s.exists and not s.resolved and "$OLDPWD" in s.unknown[0]
    s = walk(proj, 'cd src\npython3 "$PWD/train.py"\ncd -\n')
    assert s.script == proj / "src" / "train.py"


def test_bash_source_and_dollar_zero_follow_the_invoking_shell(proj: Path) -> None:
    text = 'cd "${BASH_SOURCE%/*}/src" && python3 train.py\n'
    (proj / "sub").mkdir()
    (proj / "sub" / "src").mkdir()
    (proj / "sub" / "src" / "train.py").write_text("")
    (proj / "sub" / "go.sh").write_text(text)
    assert parse(["bash", "sub/go.sh"], proj, env()).script == proj / "sub" / "src" / "train.py"
    if os.path.realpath(subprocess.run(["sh", "-c", "command -v sh"], capture_output=True, text=True).stdout.strip()
                        ).endswith("dash"):
        # under dash BASH_SOURCE is unset: `cd "/src"`, which is not there, and the && list stops
        s = parse(["sh", "sub/go.sh"], proj, env())
        assert s.script is None and s.python is None
    s = parse(["bash", "sub/go.sh"], proj, env())
    assert s.resolved


def test_a_taken_if_branch_is_exact_and_an_unknown_one_is_unknown(proj: Path) -> None:
    (proj / ".env").write_text("WORKDIR=src\n")
    s = walk(proj, 'if [ -f .env ]; then . ./.env; fi\nif [ -z "$WORKDIR" ]; then cd /nowhere; else cd "$WORKDIR"; fi\n'
                   'python3 train.py\n')
    assert s.script == proj / "src" / "train.py" and s.resolved
    s = walk(proj, 'if grep -q x /etc/hostname; then cd src; fi\npython3 train.py\n')
    assert s.script is None and "inside an `if`" in s.unknown[0]


def test_values_from_commands_it_does_not_run_are_unknown(proj: Path) -> None:
    s = walk(proj, 'D=$(mktemp -d)\ncd "$D"\npython3 "$OLDPWD/train.py"\n')
    assert s.script == proj / "train.py" and s.cwd is None  # OLDPWD is known, the new folder is not
    s = walk(proj, 'mkdir -p out/logs\ncd out/logs\npython3 "$OLDPWD/train.py"\n')
    assert s.script == proj / "train.py" and s.cwd == proj / "out" / "logs"  # the script's own mkdir is followed
    s = walk(proj, 'cp -r /etc/skel work\ncd work\npython3 ../train.py\n')
    assert s.script is None and "cp -r /etc/skel work" in s.unknown[0]  # cp may create it: not a failure
    s = walk(proj, 'git pull\npython3 new_train.py\n')
    assert s.exists and "new_train.py" in s.unknown[0] and "git pull" in s.unknown[0]


def test_function_case_and_subshell(proj: Path) -> None:
    s = walk(proj, 'main() {\n  cd src\n  python3 train.py "$@"\n}\nmain "$@"\n')
    assert not s.resolved and any("inside a function" in u for u in s.unknown)
    s = walk(proj, '(cd src && echo hi)\npython3 train.py\n')
    assert s.script == proj / "train.py" and s.resolved  # a subshell's cd ends with it
    s = walk(proj, 'case "$1" in\n  a) cd src ;;\nesac\npython3 train.py\n', "a")
    assert s.script is None


def test_set_e_and_a_folder_that_is_not_there(proj: Path) -> None:
    s = walk(proj, 'set -e\ncd /dfdoctor-no-such-folder\npython3 train.py\n')
    assert not s.exists and "set -e" in s.problem  # observed: the folder is not there and the script stops
    s = walk(proj, 'cd /dfdoctor-no-such-folder\npython3 train.py\n')
    assert s.exists and s.script == proj / "train.py"  # without set -e the shell stays where it was
    s = walk(proj, 'set -e\ncd /dfdoctor-no-such-folder || true\npython3 train.py\n')
    assert s.exists and s.script == proj / "train.py"


def test_export_versus_plain_assignment(proj: Path) -> None:
    s = walk(proj, 'A=1\nexport B=2\nset -a\nC=3\nset +a\nPATH="$PATH"\npython3 train.py\n')
    assert "A" not in s.env and s.env["B"] == "2" and s.env["C"] == "3"


def test_expansion_is_exact_or_unknown() -> None:
    sc = Scope(vars={"A": "x y", "HOME": "/h", "E": ""}, args=["1", "2 3"], zero="./run.sh", source="./run.sh",
               cwd=Path("/tmp"))
    assert expand('"$@"', sc) == ["1", "2 3"] and expand('$@', sc) == ["1", "2", "3"]
    assert expand('"$@"', Scope(args=[])) == [] and expand('$E', sc) == [] and expand('"$E"', sc) == [""]
    assert expand("${A%% *}", sc) == ["x"] and expand("${0%/*}", sc) == ["."] and expand("~/x", sc) == ["/h/x"]
    assert expand('"$(cd "$(dirname "$0")" && pwd)"', sc) == ["/tmp"]
    assert expand("'$A'", sc) == ["$A"] and expand("${NOPE:-d}", sc) == ["d"]
    assert expand('${NOPE:-"a b"}', sc) == ["a b"] and expand("${NOPE:-a b}", sc) == ["a", "b"]  # as bash and dash
    for w in ("$RANDOM", "$(date)", "$((1+1))", "${A/x/y}", "~bob/x"):
        assert isinstance(expand(w, sc), Unknown), w


def test_the_walk_never_raises_on_garbage(proj: Path) -> None:
    import random
    toks = ["if", "then", "else", "elif", "fi", "for", "x", "in", "do", "done", "case", "esac", ";;", ")", "(", "{",
            "}", "cd", "..", "src", "-", "python3", "train.py", '"$@"', "$1", "${A:-b}", "${A%/*}", "${#A}",
            '$(dirname "$0")', "$(pwd)", "`pwd`", "A=1", "export", "B=$A", "source", ".env", "go.sh", ".", "&&", "||",
            "|", "&", ";", "\n", "exec", ">", "log", "2>&1", "set", "-e", "-a", "--", "shift", "unset", "pushd",
            "popd", "[", "-f", "]", "!", "'q'", '"', "'", "$((1))", "${", "$(", "mkdir", "-p", "bash", "conda",
            "activate", "main()", "function", "~", "$OLDPWD", "${BASH_SOURCE[0]}", "${X:?}", "<<EOF", "EOF", "\\"]
    rnd = random.Random(3)
    for _ in range(1000):
        (proj / ".env").write_text(" ".join(rnd.choice(toks) for _ in range(rnd.randint(0, 10))))
        s = walk(proj, " ".join(rnd.choice(toks) for _ in range(rnd.randint(1, 30))), "a")
        assert s.exists or s.problem
