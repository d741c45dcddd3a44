"""`dfdoctor list-checks`: every check, built-in and plugins'. Loaded only when named (cli/main.py)."""

from __future__ import annotations

import json

import click
from dfdoctor.cli.options import examples
from dfdoctor.registry import discover


@click.command("list-checks", epilog=examples("list-checks"))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def list_checks(fmt: str) -> int:
    """Every check: id, title, phase(s), source (built-in or the plugin's distribution)."""
    checks, broken = discover()
    rows = [{"id": c.id, "title": c.title, "phases": list(c.phases), "timeout_s": c.timeout, "source": c.source}
            for c in checks]
    if fmt == "json":
        click.echo(json.dumps({"checks": rows, "broken": [b.__dict__ for b in broken]}, indent=2))
        return 0
    table = [(r["id"], ",".join(r["phases"]), r["source"], r["title"]) for r in rows]
    table += [(b.name, "BROKEN", b.source, b.error) for b in broken]
    table.insert(0, ("ID", "PHASES", "SOURCE", "TITLE"))
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    for row in table:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[3])
    return 0

