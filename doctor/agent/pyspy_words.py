"""Why py-spy could not dump a process's stacks, in its own words: shared by dfdoctor here and the target agent.

Standard library only, Python 3.6 syntax: it travels with the agent.
"""


def py_spy_error(stderr):
    """py-spy's own error line (and its first cause), or None. After it py-spy may print a Rust backtrace
    ("Stack backtrace:", "  10: main", "at src/main.rs:..."), whose last line says nothing of why the dump failed."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    at = next((i for i, line in enumerate(lines) if line.startswith("Error:")), None)
    if at is None:
        return next((line for line in lines if not _backtrace_line(line)), None)
    return lines[at] + _first_cause(lines[at + 1:])


def _first_cause(after):
    """': CAUSE' from the "Caused by:" lines py-spy may print right after its error (numbered "0: ..." when there
    are several: the first is the nearest), '' without them."""
    if len(after) < 2 or after[0] != "Caused by:" or after[1] == "Stack backtrace:":
        return ""
    number, _, rest = after[1].partition(": ")
    return ": " + (rest if number.isdigit() and rest else after[1])


def _backtrace_line(line):
    """A line of the Rust backtrace py-spy prints after its error (frame "N: symbol", its "at file:line")."""
    head = line.split(":", 1)[0]
    return line == "Stack backtrace:" or head.isdigit() or line.startswith("at ")
