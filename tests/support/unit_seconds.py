"""Seconds per unit of work (tests/conftest.py's `work_unit`) from a JUnit XML report, as tests/unit_seconds.json:
the scheduler hands out the longest units first, so that none is left running alone at the end.

    .venv/bin/pytest -n 4 --junitxml=/tmp/run.xml && .venv/bin/python tests/support/unit_seconds.py /tmp/run.xml
"""

from __future__ import annotations

import collections
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))

from conftest import work_unit  # noqa: E402


def unit_seconds(junit: Path) -> dict[str, int]:
    """Whole seconds per unit, longest first; units under 5 s are left out (their order does not matter)."""
    units: collections.Counter = collections.Counter()
    for case in ET.parse(junit).iter("testcase"):
        module = case.get("classname", "").split(".")
        path = "/".join(module[:-1] if module[-1][:1].isupper() else module) + ".py"  # a class's tests: its file
        units[work_unit(f"{path}::{case.get('name')}")] += float(case.get("time") or 0)
    return {unit: round(secs) for unit, secs in units.most_common() if secs >= 5}


if __name__ == "__main__":
    (TESTS / "unit_seconds.json").write_text(json.dumps(unit_seconds(Path(sys.argv[1])), indent=1) + "\n")
