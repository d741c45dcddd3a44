"""A job's loop, seen in its output: the line it prints again and again with new numbers.

A training job prints one line per step or per few steps ("step 120: loss 2.31, 410 ms"). Once one shape of
line (the line with its numbers taken out) has come back several times over a few seconds, the job is in its
loop: past its imports, its model build and the opening of its data, where start-up failures happen. The
recorder feeds every progress line here and puts the best loop in its heartbeat; dfdoctor's settle check reads
it there (`dfdoctor.watch.settle.in_its_loop`), as does the Slurm watch from the job's output file.

A burst (a table of layers printed at once) is not a loop: the settle check asks for repeats spread over
seconds. Lines updated with carriage returns (progress bars) never end in a newline until they are done, so
they are not counted at all. A line that counts towards a total ("target step 140/300") tells how soon its
phase ends: the heartbeat carries the count of its first and latest line, so a phase about to end (a short
warm-up before a compile) is not taken for the job's loop.
"""

import re

NUMBER = re.compile(rb"[-+]?(?:\d+(?:[.,]\d+)*|\.\d+)(?:[eE][-+]?\d+)?")
SHAPE_BYTES = 160  # a shape is the line's start: a loop's line begins the same way every time
MAX_SHAPES = 256  # memory bound; when full, shapes seen only once are forgotten first
LINE_KEPT = 4096  # of each shape's latest line, masked whole before it is shaped (a secret is never cut in two)
RECENT_S = 10.0  # a shape not printed in this long, while others were, is a phase that ended (loading shards)


def shape_of(line):
    """The line with every number replaced by '#' (bytes), or None when it has no number: a loop's line
    carries a counter or a measure, a banner repeated by several processes does not."""
    shape = NUMBER.sub(b"#", line.strip()[:SHAPE_BYTES * 2])[:SHAPE_BYTES]
    return shape if b"#" in shape else None


def progress_lines(partial, data):
    """The complete lines of output that show progress, not warnings, traceback or continuation lines, in
    `partial` (what was left of the last call) followed by `data`; and what is left for the next call."""
    lines = (partial + data).split(b"\n")
    rest = lines.pop()[-4096:]
    return [line for line in lines if line.strip() and not line[:1].isspace() and b"Warning:" not in line
            and not line.startswith(b"Traceback (most recent call last)")], rest


def fractions(text):
    """Every `DONE/OF` of whole numbers in a line, DONE at most OF: "epoch 1/3 step 140/300:" gives
    [(1, 3), (140, 300)]; a date such as 12/03 is none."""
    found = []
    for word in text.replace(",", " ").split():
        word = word.strip("()[]{}:;.!|")
        if word.count("/") == 1:
            done, of = word.split("/")
            if done.isdigit() and of.isdigit() and 0 < int(of) and int(done) <= int(of):
                found.append((int(done), int(of)))
    return found


def moving(first_text, text):
    """The count towards a total that moved between a loop's first and latest line, as (done then, done now,
    total); else the latest line's first count, unmoved; None when the line counts towards nothing."""
    now, then = fractions(text), fractions(first_text)
    pairs = [(a, b) for a, b in zip(then, now) if a[1] == b[1]] if len(then) == len(now) else []
    for a, b in pairs:
        if b[0] != a[0]:
            return a[0], b[0], b[1]
    return (now[0][0], now[0][0], now[0][1]) if now else None


class LoopLines(object):
    """Counts, per shape, how often and over what time a line of that shape was printed."""

    def __init__(self):
        self.shapes = {}  # shape -> [count, first_t, last_t, last line, first line]

    def add(self, line, t):
        """One complete line of output (bytes, without its newline) printed at wall time `t`."""
        shape = shape_of(line)
        if shape is None:
            return
        seen = self.shapes.get(shape)
        if seen is not None:
            seen[0] += 1
            seen[2] = t
            seen[3] = line[:LINE_KEPT]
            return
        if len(self.shapes) >= MAX_SHAPES:
            self.shapes = dict((k, v) for k, v in self.shapes.items() if v[0] > 1)
            if len(self.shapes) >= MAX_SHAPES:
                return
        self.shapes[shape] = [1, t, t, line[:LINE_KEPT], line[:LINE_KEPT]]

    def best(self, mask=None):
        """The shape printed most often lately, as the heartbeat carries it: {"shape", "count", "first_t",
        "last_t"}, and "done", "of", "first_done" when its lines count towards a total; None before any shape
        came twice. Everything shown is read from lines after `mask` (when given) hid their secrets: a secret's
        digits taken out first would hide it from the mask."""
        if not self.shapes:
            return None
        newest = max(v[2] for v in self.shapes.values())
        count, first, last, line, first_line = max(self.shapes.values(),
                                                   key=lambda v: (v[2] >= newest - RECENT_S, v[0], v[2]))
        if count < 2:
            return None
        text, first_text = (_text(x, mask) for x in (line, first_line))
        shape = shape_of(text.encode("utf-8", "replace")) or b""
        best = {"shape": shape.decode("utf-8", "replace"), "count": count,
                "first_t": round(first, 3), "last_t": round(last, 3)}
        counted = moving(first_text, text)
        if counted is not None:
            best.update(first_done=counted[0], done=counted[1], of=counted[2])
        return best


def _text(line, mask):
    """A kept line as text, its secrets masked."""
    text = line.decode("utf-8", "replace")
    return mask(text) if mask is not None else text
