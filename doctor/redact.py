"""Secret masking for every output format: what a report says must be safe to paste into a team chat.

The rules themselves are `dfdoctor.agent.mask` (standard library only, so the recorder on a target masks by the
very same module); this adds what only dfdoctor here does: masking a whole `Report`.
"""

from __future__ import annotations

from typing import Optional

from dfdoctor.agent import mask
from dfdoctor.agent.mask import (MASK, TOKEN_SHAPES, SecretPrints, encoded_forms, key_looks_secret,
                                 name_looks_secret, value_is_maskable)
from dfdoctor.model import Report

__all__ = ["MASK", "TOKEN_SHAPES", "Redactor", "SecretPrints", "encoded_forms", "key_looks_secret",
           "name_looks_secret", "value_is_maskable"]


class Redactor(mask.Redactor):
    """The agent's rules, plus a report masked whole."""

    def report(self, report: Report, prints: Optional[SecretPrints] = None) -> Report:
        """A masked copy of `report`; the original is left untouched. `prints`: the launch's secret fingerprints,
        for a report made later without the launch's environment."""
        doc = report.to_dict()
        # Secrets the report itself reveals by name (the job's environment, a target's env dump) are masked
        # wherever else they appear, e.g. echoed in a traceback; so is anything that argv or the prints say.
        learned = Redactor(self._secrets)
        learned.learn(doc)
        learned.learn_argv(doc.get("command") or [])
        learned.learn_prints(prints, doc)
        return Report.from_dict(learned.value(doc))
