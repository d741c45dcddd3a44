"""The one exception for bad input from the user: the CLI prints its message as one line and exits 2."""


class UsageError(Exception):
    """Input dfdoctor cannot act on (an unknown option value, an unreadable config, a malformed target, ...)."""
