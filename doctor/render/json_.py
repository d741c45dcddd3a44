"""The `dfdoctor/1` JSON document."""

import json

from dfdoctor.model import Report


def render(report: Report, verbose: bool = False) -> str:
    """Pretty-printed, key order stable, so saved results diff well."""
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"
