"""Issue 43, item 5: the smaller points a new user's try-out found, each with the case that showed it."""

from __future__ import annotations

from dfdoctor.engine import verdict_from_checks
from dfdoctor.model import CheckRecord, Status


def test_fail_on_warn_headline_names_the_first_warning_not_a_check_that_could_not_look():
    """Under --fail-on warn a warning is what fails the check; a check that could not look (error) found nothing,
    so the headline is the first warning's words, check id and cause id, and the error is listed below it."""
    records = [CheckRecord("args.paths", "pre", Status.WARN, "--data missing.bin: no such file",
                           cause="input-missing", fix="pass the path where it is"),
               CheckRecord("deps.requirements", "pre", Status.ERROR, "the dependency probe gave no answer"),
               CheckRecord("log.writable", "pre", Status.WARN, "12 MiB free where the log goes", cause="disk-full")]
    v = verdict_from_checks(records, "warn")
    assert v.state == "failed" and v.cause == "input-missing", v
    assert v.summary.startswith("--data missing.bin: no such file (args.paths;"), v.summary
    assert v.fix == "pass the path where it is"
    assert any(e.startswith("deps.requirements (error)") for e in v.evidence), v.evidence
    # under the default level the warnings do not count, and the error alone is "could not look"
    assert verdict_from_checks(records, "error").state == "unknown"
