"""dfdoctor's own exceptions: bad input from the user (the CLI prints its message as one line and exits 2), and
a check that could not look (the runner makes it that check's `error`, with its words and fix)."""


class UsageError(Exception):
    """Input dfdoctor cannot act on (an unknown option value, an unreadable config, a malformed target, ...)."""


class CheckCannotRun(Exception):
    """A check could not look at all (its probe cannot run where it must): an `error` result, never a verdict
    about the user's launch, and no traceback of dfdoctor's own, since the words say what happened."""

    def __init__(self, summary: str, fix: str, details: str = "") -> None:
        super().__init__(summary)
        self.summary, self.fix, self.details = summary, fix, details
