"""args.paths: do the files the command names, and the log folder the code names, exist?

`--data data/train.jsonl` (missing) and `--config configs/small.yml` (the file is `.yaml`) end the job a second
after the launch, after a queue wait and a torch import. The project model (doctor/project) knows which options
are paths the code opens for reading (`open(args.config)`, `torch.load(args.ckpt)`, `os.path.join(args.data_dir,
'train.bin')`) and which log file the code opens itself (`logging.basicConfig(filename='logs/train.log')`). Each
such path is looked at on this machine, against the job's folder. The code is read, not run (the open may sit
under a branch the job never takes), so a missing path is a warning, with the closest file that does exist; it
fails only where the script is proved to open it on every run (project/reach.py: at module level, or in the
`main()` it always calls, with no branch, existence check, try or exit on the way).
"""

from __future__ import annotations

import difflib
import os
import shlex
from pathlib import Path
from typing import Iterator, Optional

from dfdoctor import OBSERVED, STATIC, Result, causes, check, fail, ok, skip, warn
from dfdoctor import project
from dfdoctor.launchline.commandline import spec_for


def _nothing_here(ctx) -> Optional[str]:
    """Why there are no paths to look at from here (said without a worker: see Check.not_applicable), else None."""
    if not ctx.command:
        return "no command given, so there are no paths to look at"
    if not ctx.target.runs_here:
        return "the job's files live on the target; they were not looked at from here"
    return None


@check("args.paths", title="The files the command names and the code opens exist", phases=("pre",), timeout=10,
       not_applicable=_nothing_here)
def args_paths(ctx) -> Iterator[Result]:
    """Match each option the command gives with the code's reads of it, and look at each path read."""
    spec = spec_for(ctx)
    if spec.script is None or not Path(spec.script).is_file():
        yield skip("the launch runs no script file whose reads could be followed")
        return
    cwd = Path(spec.cwd or ctx.cwd)
    proj = project.read([str(spec.script), *spec.script_args], cwd, script=str(spec.script))
    proj = _with_args(proj, spec.script_args)
    problems = list(_missing_inputs(proj, cwd, Path(spec.script))) + list(_missing_log_folders(proj, cwd))
    yield from problems
    if not problems:
        looked = sum(1 for _, _, u in _read_options(proj) if u.under is not None and not _made_by_the_code(proj, u)) \
            + len(_log_uses(proj))
        yield ok(f"{looked} path(s) the command gives or the code logs to exist", basis=STATIC) if looked else \
            skip("the command gives no option the code opens as a file, and the code opens no log of its own")


def _with_args(proj: project.Project, args: list[str]) -> project.Project:
    """The project with the command's own arguments (read() was given the script alone)."""
    from dataclasses import replace
    return replace(proj, args=tuple(args))


def _read_options(proj: project.Project) -> Iterator[tuple[project.Option, str, project.PathUse]]:
    """(option, value given, the code's read of it) for each option the command gives that the code opens."""
    for o in proj.options.options:
        value = proj.given(o)
        if not value or value.startswith(("s3://", "gs://", "http://", "https://", "hf://")):
            continue
        use = next((u for u in proj.paths if u.mode == "read" and u.dest and
                    (u.dest == o.dest or u.dest.rsplit(".", 1)[-1] == o.dest)), None)
        if use is not None:
            yield o, value, use


def _missing_inputs(proj: project.Project, cwd: Path, script: Path) -> Iterator[Result]:
    """For each path option whose value is not there (a file, or the folder a file is joined into): a failure
    where the script is proved to read it on every run, else a warning (the read may sit under a branch)."""
    for o, value, use in _read_options(proj):
        if use.under is None or _made_by_the_code(proj, use):
            continue  # where the value lands cannot be read, or the code creates that folder itself
        path = Path(os.path.expanduser(use.under + value))  # nanoGPT's --dataset: under data/
        full = path if path.is_absolute() else cwd / path
        joined = use.hint is not None  # os.path.join(args.data_dir, 'train.bin'): the value is a folder
        if full.exists():
            continue
        near = closest(full)
        meant = f"; did you mean {_rel(near, cwd)}?" if near else ""
        kind = "folder" if joined else "file"
        always = _read_on_every_run(proj, use, cwd, script)
        flag = proj.typed_flag(o)  # the user's spelling: `-i nmes.txt` is said as `-i`, not `--input-file`
        pass_it = (f"Pass {o.spelled(_rel(near, cwd)[len(use.under):] if _rel(near, cwd).startswith(use.under) else _rel(near, cwd), flag)} "
                   f"(that {'folder' if near.is_dir() else 'file'} exists)"
                   if near else f"Create {_rel(full, cwd)} or pass the path where it is")
        yield (fail if always else warn)(
            f"{flag} {value}: no such {kind}" + (f" {_rel(full, cwd)}" if use.under else "") +
            f" (relative to {cwd}){meant}" +
            (f"; {use.where} opens it on every run" if always else ""), causes.INPUT_MISSING,
            basis=OBSERVED if always else STATIC,
            evidence=(f"{use.where}: the code opens the value of {o.flag}" + (f" ({flag})" if flag != o.flag else "") +
                      (f", joined with {use.hint!r}" if joined else "") +
                      (" (at module level, or in a function the script always calls, with no branch, existence "
                       "check, try or exit before it)" if always else ""),
                      f"command: ... {shlex.join(proj.words_of(o))}"),
            fix=pass_it + ("; not tried." if always else
                           "; the code was read, not run, so whether this branch runs was not seen."))


def _made_by_the_code(proj: project.Project, use: project.PathUse) -> bool:
    """The value names a folder the code creates itself (`os.makedirs(out_dir)`, nanoGPT's --out_dir): its absence
    before the launch is no problem, and "create it" no advice."""
    return use.hint is not None and any(u.mode == "mkdir" and u.dest == use.dest for u in proj.paths)


def _read_on_every_run(proj: project.Project, use: project.PathUse, cwd: Path, script: Path) -> bool:
    """The read is in the script the command runs, on every run of it (project/reach.py), and nothing in the
    project writes, creates or fetches that path first: its absence now is its absence then."""
    if not use.always or (cwd / use.file).resolve() != script.resolve():
        return False
    return not any(u.mode in ("write", "mkdir") and u.dest == use.dest for u in proj.paths)


def _log_uses(proj: project.Project) -> list[project.PathUse]:
    """The log files the code opens itself with a literal path (`logging.basicConfig(filename='logs/x.log')`)."""
    return [u for u in proj.paths if u.mode == "log" and u.hint and not u.dest]


def _missing_log_folders(proj: project.Project, cwd: Path) -> Iterator[Result]:
    """A warning for each log file the code opens in a folder that does not exist (and nothing creates)."""
    made = {os.path.normpath(u.hint) for u in proj.paths if u.mode == "mkdir" and u.hint}
    for use in _log_uses(proj):
        folder = os.path.dirname(use.hint)
        if not folder or (cwd / folder).is_dir() or os.path.normpath(folder) in made:
            continue
        yield warn(f"{use.where} logs to {use.hint}, and the folder {folder} does not exist (relative to {cwd})",
                   causes.LOG_DIR_MISSING, basis=STATIC, evidence=(f"{use.where}: the code opens {use.hint}",),
                   fix=f"Create it before the launch (mkdir -p {shlex.quote(folder)}), or in the code before "
                       f"the logging set-up: os.makedirs({folder!r}, exist_ok=True); not tried.")


def closest(full: Path) -> Optional[Path]:
    """The existing file or folder whose name is closest to a missing one: in its folder (`small.yml` ->
    `small.yaml`), or, when the folder is missing too, the closest folder beside it holding that name."""
    parent = full.parent
    if parent.is_dir():
        return _near_in(parent, full.name)
    grand = parent.parent
    if grand.is_dir():
        folder = _near_in(grand, parent.name)
        if folder is not None and folder.is_dir():
            return folder / full.name if (folder / full.name).exists() else folder
    return None


def _near_in(folder: Path, name: str) -> Optional[Path]:
    try:
        entries = [e.name for e in os.scandir(folder)][:5000]
    except OSError:
        return None
    stem = name.rsplit(".", 1)[0]
    same_stem = [e for e in entries if e.rsplit(".", 1)[0] == stem and e != name]
    found = same_stem or difflib.get_close_matches(name, entries, n=1, cutoff=0.75)
    return folder / found[0] if found else None


def _rel(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)
