"""args.known: does the script take the options the command gives it?

A mistyped option (`--epocs 6`, `--trainer.max_iter=10`) ends the job at its first line with argparse's exit 2, or
deep in a config loader, after a launch, a queue wait and a torch import. The script's parser is read from its
source (doctor/project: argparse, click, nanoGPT's configurator, minGPT's CfgNode), so this is a static reading
and can only warn; where the source does not list every option (LightningCLI, parse_known_args, subcommands), or
the parser cannot be read, it skips and says why.
"""

from __future__ import annotations

from typing import Iterator, Optional

from dfdoctor import STATIC, Result, check, ok, skip, warn
from dfdoctor import project
from dfdoctor.launchline.commandline import spec_for


def _nothing_here(ctx) -> Optional[str]:
    """Why there is no parser to read from here (said without a worker: see Check.not_applicable), else None."""
    if not ctx.command:
        return "no command given, so there are no options to match"
    if not ctx.target.runs_here:
        return "the entry script lives on the target; its parser was not read from here"
    return None


@check("args.known", title="The script takes the options the command gives it", phases=("pre",), timeout=10,
       gates=False, not_applicable=_nothing_here)  # a static reading: it gives no cause, so never stops a launch
def args_known(ctx) -> Iterator[Result]:
    """Read the entry script's parser and match each option of the command against it."""
    spec = spec_for(ctx)
    if spec.script is None:
        yield skip("the launch runs no script file whose parser could be read")
        return
    words = list(spec.script_args)
    words = words[:words.index("--")] if "--" in words else words  # after a lone `--`, every word is positional
    if not any(_option_word(w) for w in words):
        yield skip(f"the command gives {spec.script.name} no options to match")
        return
    proj = project.read([], ctx.cwd, script=str(spec.script))
    opts = proj.options
    if opts.kind == "none":
        given = " ".join(w for w in words if _option_word(w))
        yield warn(f"{spec.script.name} reads no command-line options: {given} is ignored", basis=STATIC,
                   fix=f"Set these in {spec.script.name} itself (it has no parser), or drop them from the command.",
                   evidence=(f"no parser and no use of sys.argv in {spec.script} or the project's modules it "
                             "imports",))
        return
    if opts.kind in ("other", "lightning", "jsonargparse") or not opts.complete:
        yield skip(f"{spec.script.name}'s options are not all in its source ({opts.kind} parser"
                   f"{'' if opts.complete else ', read only in part'}): they were not matched")
        return
    unknown = [(word, opts.closest(word)) for word in words if _unknown(word, opts)]
    if not unknown:
        yield ok(f"every option given is one {spec.script.name} declares ({opts.kind}, {len(opts.options)} "
                 "options read from its source)", basis=STATIC)
        return
    for word, near in unknown:
        meant = f"; did you mean {near.flag} ({near.where})?" if near else ""
        yield warn(f"{spec.script.name} has no option {word.split('=', 1)[0]}{_read_as(word, opts)}{meant}",
                   basis=STATIC,
                   fix=(f"Use {near.flag} (declared at {near.where})" if near else
                        f"Remove {word.split('=', 1)[0]} or spell it as the script declares it") +
                   (f"; `python {spec.script.name} --help` lists them." if opts.kind in ("argparse", "click")
                    else f"; this project sets them as `--NAME=VALUE` ({opts.kind})."),
                   evidence=(f"{opts.kind} options read from {spec.script}: " +
                             ", ".join(o.flag for o in opts.options[:30]),))


def _read_as(word: str, opts: project.Options) -> str:
    """How the parser reads an unknown word that begins with a one-letter flag it has (`-lr` is `-l r`)."""
    short = next((o for o in opts.options if len(word) > 2 and word[:2] in o.shorts), None)
    if short is None:
        return ""
    if short.switch:
        return f" ({word[:2]} is {short.flag}, a switch, and the letters after it are not all switches it has)"
    return (f" ({opts.kind} reads it as {word[:2]} {word[2:].lstrip('=')!r}: {short.flag}"
            f"{f' takes a value of type {short.kind}' if short.kind else ''})")


def _option_word(word: str) -> bool:
    """A word of the command that a parser reads as an option: `--name`, `-n`, `-n5`; not `-` (stdin), not `--`,
    not a negative number (`--lr -1e-3`'s value)."""
    if not word.startswith("-") or word in ("-", "--"):
        return False
    try:
        float(word)
    except ValueError:
        return True
    return False


def _unknown(word: str, opts: project.Options) -> bool:
    """An option word of the command that the parser does not take (argparse's unique prefixes count); a word
    with one dash (`-b 64`, `-lr`) is read as the parser reads its short aliases (fire's are its own: not judged)."""
    if not _option_word(word):
        return False
    if not word.startswith("--"):
        return opts.kind != "fire" and opts.single_dash(word) is None
    name = word.split("=", 1)[0]
    if opts.find(name) is not None:
        return False
    if opts.kind == "argparse" and opts.abbrev:
        longs = [f for o in opts.options for f in o.flags if f.startswith(name)]
        return len(longs) != 1
    return True
