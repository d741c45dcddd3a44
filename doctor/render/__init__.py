"""Renderers: each turns one `Report` into one format, and does nothing else."""

from __future__ import annotations

import inspect
from importlib import import_module
from typing import Callable

from dfdoctor.model import Report

FORMATS = ("text", "json", "junit", "html", "github", "sarif", "gitlab")
_MODULES = {"text": "text", "json": "json_", "junit": "junit", "html": "html", "github": "github", "sarif": "sarif",
            "gitlab": "gitlab"}
EXTENSIONS = {".json": "json", ".xml": "junit", ".html": "html", ".htm": "html", ".txt": "text", ".log": "text",
              ".sarif": "sarif"}


def renderer(fmt: str) -> Callable[..., str]:
    """The `render(report, verbose=..., color=...)` function of a format, imported on first use."""
    return import_module(f"{__name__}.{_MODULES[fmt]}").render


def prepare(fmt: str) -> None:
    """Import a format's renderer and let it prepare what every report needs (html: its compiled templates)."""
    module = import_module(f"{__name__}.{_MODULES[fmt]}")
    if hasattr(module, "prepare"):
        module.prepare()


def render(report: Report, fmt: str, **options) -> str:
    """Render `report` as `fmt`, passing each renderer only the options it takes (verbose, color, fail_on)."""
    fn = renderer(fmt)
    accepted = inspect.signature(fn).parameters
    return fn(report, **{k: v for k, v in options.items() if k in accepted})
