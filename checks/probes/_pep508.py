"""A minimal PEP 440/508 implementation for interpreters where no `packaging` can be loaded.

deps_probe.py prefers the real `packaging` (dfdoctor's copy, the interpreter's, or pip's vendored one).
This fallback exists for the environments where none works: a pip-less venv (uv creates those) on a
Python older than dfdoctor's `packaging` supports. Standard library only; Python 3.6+. It offers the
subset deps_probe.py uses: `Requirement(text)` with `.name`, `.extras`, `.url`, `.specifier` (`str()`,
`.contains(v, prereleases=True)`) and `.marker` (`str()`, `.evaluate(env)`), and `Version(text)`.
tests/test_deps_pep508.py compares it with `packaging` case by case.
"""

import os
import platform
import re
import sys

_VERSION_RE = re.compile(r"""^\s*v?
    (?:(?P<epoch>[0-9]+)!)?
    (?P<release>[0-9]+(?:\.[0-9]+)*)
    (?P<pre>[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?
    (?P<post>(?:-(?P<post_n1>[0-9]+))|(?:[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?))?
    (?P<dev>[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    \s*$""", re.VERBOSE | re.IGNORECASE)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


class InvalidVersion(ValueError):
    """Not a PEP 440 version."""


class Version(object):
    """A PEP 440 version, comparable with another."""

    def __init__(self, text):
        m = _VERSION_RE.match(text)
        if not m:
            raise InvalidVersion("invalid version: %r" % text)
        self.text = text
        self.epoch = int(m.group("epoch") or 0)
        self.release = tuple(int(x) for x in m.group("release").split("."))
        self.pre = (_PRE_RANK[m.group("pre_l").lower()], int(m.group("pre_n") or 0)) if m.group("pre") else None
        post_n = m.group("post_n1") or m.group("post_n2")
        self.post = int(post_n or 0) if m.group("post") else None
        self.dev = int(m.group("dev_n") or 0) if m.group("dev") else None
        self.local = m.group("local")

    @property
    def is_prerelease(self):
        """True for a/b/rc and .dev versions."""
        return self.pre is not None or self.dev is not None

    @property
    def public(self):
        """The same version without its local part."""
        v = Version(self.text.split("+")[0])
        return v

    def key(self, with_local=True):
        """A tuple that sorts as PEP 440 orders versions."""
        rel = list(self.release)
        while len(rel) > 1 and rel[-1] == 0:
            rel.pop()
        if self.pre is None and self.post is None and self.dev is not None:
            pre = (0,)
        elif self.pre is None:
            pre = (2,)
        else:
            pre = (1,) + self.pre
        post = (0,) if self.post is None else (1, self.post)
        dev = (1,) if self.dev is None else (0, self.dev)
        local = (0,)
        if with_local and self.local:
            local = (1,) + tuple((1, int(p), "") if p.isdigit() else (0, 0, p.lower())
                                 for p in re.split(r"[-_.]", self.local))
        return (self.epoch, tuple(rel), pre, post, dev, local)

    def __lt__(self, other):
        return self.key() < other.key()

    def __eq__(self, other):
        return isinstance(other, Version) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __str__(self):
        return self.text


class Specifier(object):
    """One `op version` clause."""

    def __init__(self, op, ver):
        self.op, self.ver = op, ver

    def __str__(self):
        return self.op + self.ver

    def contains(self, v):
        """Does the version satisfy this (these) clause(s)?"""
        op, s = self.op, self.ver
        if op == "===":
            return str(v).lower() == s.lower()
        if op in ("==", "!=") and s.endswith(".*"):
            want = Version(s[:-2])
            have = v.public
            rel = list(have.release) + [0] * max(0, len(want.release) - len(have.release))
            match = have.epoch == want.epoch and tuple(rel[:len(want.release)]) == want.release
            return match if op == "==" else not match
        spec = Version(s)
        if op in ("==", "!="):
            have = v if spec.local else v.public
            eq = have.key() == spec.key()
            return eq if op == "==" else not eq
        if op == "~=":
            prefix = ".".join(str(x) for x in spec.release[:-1])
            epoch = "%d!" % spec.epoch if spec.epoch else ""
            return Specifier(">=", s).contains(v) and Specifier("==", epoch + prefix + ".*").contains(v)
        pv = v.public
        if op == "<=":
            return pv.key() <= spec.key()
        if op == ">=":
            return pv.key() >= spec.key()
        if op == "<":
            if not pv.key() < spec.key():
                return False
            if not spec.is_prerelease and pv.is_prerelease and _base(pv) == _base(spec):
                return False
            return True
        if op == ">":
            if not pv.key() > spec.key():
                return False
            if spec.post is None and pv.post is not None and _base(pv) == _base(spec):
                return False
            if v.local and pv.key() == spec.key():
                return False
            return True
        raise ValueError("unknown operator %r" % op)


def _base(v):
    """(epoch, release without trailing zeros): what `<V`/`>V` compare pre/post-releases by."""
    rel = list(v.release)
    while len(rel) > 1 and rel[-1] == 0:
        rel.pop()
    return (v.epoch, tuple(rel))


class SpecifierSet(object):
    """Comma-separated specifiers; empty means anything."""

    _CLAUSE = re.compile(r"^\s*(~=|===|==|!=|<=|>=|<|>)\s*([A-Za-z0-9_.*+!-]+)\s*$")

    def __init__(self, text):
        self.specs = []
        text = text.strip()
        if text.startswith("(") and text.endswith(")"):
            text = text[1:-1]
        for part in [p for p in text.split(",") if p.strip()] if text.strip() else []:
            m = self._CLAUSE.match(part)
            if not m:
                raise ValueError("invalid specifier: %r" % part.strip())
            self.specs.append(Specifier(m.group(1), m.group(2)))

    def __str__(self):
        return ",".join(sorted(str(s) for s in self.specs))

    def contains(self, version, prereleases=True):
        """Does the version satisfy this (these) clause(s)?"""
        v = version if isinstance(version, Version) else Version(str(version))
        return all(s.contains(v) for s in self.specs)


_TOKEN = re.compile(r"""\s*(?:(?P<str>'[^']*'|"[^"]*")|(?P<op>===|==|!=|<=|>=|~=|<|>|\(|\))|
                        (?P<word>[A-Za-z_][A-Za-z0-9_.]*))""", re.VERBOSE)
_VARS = {"python_version", "python_full_version", "os_name", "sys_platform", "platform_release",
         "platform_system", "platform_version", "platform_machine", "platform_python_implementation",
         "implementation_name", "implementation_version", "extra", "os.name", "sys.platform",
         "platform.version", "platform.machine", "platform.python_implementation", "python_implementation"}


def default_environment():
    """The marker variables of this interpreter."""
    iv = sys.implementation.version
    impl_version = "%d.%d.%d" % (iv.major, iv.minor, iv.micro)
    if iv.releaselevel != "final":
        impl_version += iv.releaselevel[0] + str(iv.serial)
    return {"implementation_name": sys.implementation.name, "implementation_version": impl_version,
            "os_name": os.name, "platform_machine": platform.machine(), "platform_release": platform.release(),
            "platform_system": platform.system(), "platform_version": platform.version(),
            "python_full_version": platform.python_version(),
            "platform_python_implementation": platform.python_implementation(),
            "python_version": ".".join(platform.python_version_tuple()[:2]), "sys_platform": sys.platform}


class Marker(object):
    """A PEP 508 environment marker."""

    def __init__(self, text):
        self.text = text.strip()
        self.tokens = self._tokenize(self.text)
        self._parse_check()

    def __str__(self):
        return self.text

    @staticmethod
    def _tokenize(text):
        """Split a marker into strings, operators and words."""
        pos, toks = 0, []
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise ValueError("invalid marker: %r" % text)
            if m.group("str") is not None:
                toks.append(("str", m.group("str")[1:-1]))
            elif m.group("op") is not None:
                toks.append(("op", m.group("op")))
            else:
                toks.append(("word", m.group("word")))
            pos = m.end()
        return toks

    def _parse_check(self):
        """Reject a malformed marker at construction time, as packaging does."""
        self.evaluate({"extra": ""}, _dry=True)

    def evaluate(self, environment=None, _dry=False):
        """Evaluate the marker in this interpreter's environment, overridden by `environment`."""
        env = default_environment()
        env.update(environment or {})
        self._env, self._i, self._dry = env, 0, _dry
        val = self._or()
        if self._i != len(self.tokens):
            raise ValueError("invalid marker: %r" % self.text)
        return val

    def _peek(self):
        """The next token without consuming it."""
        return self.tokens[self._i] if self._i < len(self.tokens) else (None, None)

    def _take(self):
        """Consume and return the next token."""
        t = self._peek()
        if t[0] is None:
            raise ValueError("invalid marker (ends early): %r" % self.text)
        self._i += 1
        return t

    def _or(self):
        """or-expression."""
        v = self._and()
        while self._peek() == ("word", "or"):
            self._take()
            rhs = self._and()
            v = v or rhs
        return v

    def _and(self):
        """and-expression."""
        v = self._atom()
        while self._peek() == ("word", "and"):
            self._take()
            rhs = self._atom()
            v = v and rhs
        return v

    def _atom(self):
        """A parenthesised expression or one comparison."""
        if self._peek() == ("op", "("):
            self._take()
            v = self._or()
            if self._take() != ("op", ")"):
                raise ValueError("invalid marker (unbalanced parenthesis): %r" % self.text)
            return v
        lhs, lname = self._value()
        kind, op = self._take()
        if kind == "word" and op == "not" and self._peek() == ("word", "in"):
            self._take()
            op = "not in"
        elif kind == "word" and op == "in":
            op = "in"
        elif kind != "op" or op in ("(", ")"):
            raise ValueError("invalid marker operator in %r" % self.text)
        rhs, rname = self._value()
        if "extra" in (lname, rname):
            lhs, rhs = _canon(lhs), _canon(rhs)
        return _compare(lhs, op, rhs)

    def _value(self):
        """A quoted string or a marker variable's value."""
        kind, val = self._take()
        if kind == "str":
            return val, None
        if kind == "word" and val in _VARS:
            name = val.replace(".", "_") if val != "python_implementation" else "platform_python_implementation"
            return str(self._env.get(name, "")), name
        raise ValueError("invalid marker value %r in %r" % (val, self.text))


def _canon(name):
    """PEP 503 normalised name (for `extra` comparisons)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _compare(lhs, op, rhs):
    """One marker comparison: as versions when both sides parse, else as strings."""
    if op == "in":
        return lhs in rhs
    if op == "not in":
        return lhs not in rhs
    try:
        return SpecifierSet(op + rhs).contains(Version(lhs))
    except ValueError:
        pass
    if op == "==":
        return lhs == rhs
    if op == "!=":
        return lhs != rhs
    if op == "===":
        return lhs == rhs
    raise ValueError("cannot compare %r %s %r as versions" % (lhs, op, rhs))


_REQ = re.compile(r"^\s*(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*"
                  r"(?:\[(?P<extras>[^\]]*)\])?\s*(?P<rest>.*?)\s*$", re.S)


class Requirement(object):
    """A PEP 508 requirement line."""

    def __init__(self, text):
        m = _REQ.match(text)
        if not m:
            raise ValueError("invalid requirement: %r" % text)
        self.name = m.group("name")
        extras = m.group("extras") or ""
        self.extras = set(e.strip() for e in extras.split(",") if e.strip())
        rest = m.group("rest")
        self.url = None
        marker = None
        if rest.startswith("@"):
            url_part, _, marker_part = rest[1:].partition(" ;")
            self.url = url_part.strip()
            if not self.url:
                raise ValueError("invalid requirement (empty URL): %r" % text)
            marker = marker_part.strip() or None
            spec = ""
        else:
            spec, sep, marker_part = rest.partition(";")
            marker = marker_part.strip() if sep else None
            if sep and not marker:
                raise ValueError("invalid requirement (empty marker): %r" % text)
        self.specifier = SpecifierSet(spec)
        self.marker = Marker(marker) if marker else None


version = sys.modules[__name__]  # so `mod.Version` works for both this module and packaging.version
