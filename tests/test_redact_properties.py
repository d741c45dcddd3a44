"""Property: a secret of any known token shape (redact.TOKEN_SHAPES), wherever a report carries it and whatever
surrounds it, never comes out of any renderer (every format in dfdoctor.render.FORMATS)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from dfdoctor.engine import redacted
from dfdoctor.model import CheckRecord, Report, Status, Verdict
from dfdoctor.redact import TOKEN_SHAPES
from dfdoctor.render import FORMATS, render

# What may stand next to a token in real output: spaces, quotes, assignments, brackets, punctuation, a URL.
BEFORE = ["", " ", "\n", "'", '"', "=", ": ", "(", "[", "{", ",", "/", "token ", "Bearer ", "https://x:",
          "-H 'X-Key: ", "\t", "<", "`", "key="]
AFTER = ["", " ", "\n", "'", '"', ")", "]", "}", ",", ".", ";", "@github.com", "&x=1", ">", "`", "\r\n", "\t",
         "_tail", "-", "/path"]
PLACES = ["summary", "details", "output", "evidence", "fix", "verdict", "command", "env", "timeline", "data",
          "run"]


def tokens():
    """A token of each shape, built by its own pattern (the leading word boundary is where it is placed)."""
    return st.sampled_from(TOKEN_SHAPES).flatmap(
        lambda shape: st.from_regex(re.compile(shape[0] + shape[1]), fullmatch=True)
        .filter(lambda t: t.isascii() and "\n" not in t))


def report_with(text: str, place: str) -> Report:
    rec = CheckRecord("imports.smoke", "pre", Status.FAIL, "summary", cause="import-error", details="details",
                      fix="fix", evidence=["evidence"], output="output", data={"rows": [{"k": "v"}]})
    if place in ("summary", "details", "output", "fix"):
        setattr(rec, place, text)
    elif place == "evidence":
        rec.evidence = ["first", text]
    elif place == "data":
        rec.data = {"rows": [{"value": text}], "note": text}
    verdict = Verdict("failed", "import-error", text if place == "verdict" else "the job died", "fix it",
                      [text] if place == "verdict" else [])
    return Report(tool_version="t", target="local", started_at="", finished_at="", verdict=verdict,
                  command=["python", "train.py", text] if place == "command" else ["python", "train.py"],
                  checks=[rec], environment={"SETTING": text} if place == "env" else {"host": "h"},
                  timeline=[{"t": 1.0, "event": "spawned", "detail": text}] if place == "timeline" else [],
                  run={"dir": "/runs/x", "log": text} if place == "run" else {"dir": "/runs/x"}, mode="launch")


@settings(max_examples=150, deadline=None)
@given(token=tokens(), before=st.sampled_from(BEFORE), after=st.sampled_from(AFTER),
       filler=st.text(alphabet=" abcxyz\n", max_size=20), place=st.sampled_from(PLACES))
def test_no_token_of_a_known_shape_gets_through_any_renderer(token, before, after, filler, place):
    text = filler + "\n" + before + token + after + " " + filler  # the token starts a word, as tokens do
    safe = redacted(report_with(text, place), env={})
    for fmt in FORMATS:
        for verbose in (False, True):
            out = render(safe, fmt, verbose=verbose, color=False)
            assert token not in out, (fmt, verbose, place, text)
