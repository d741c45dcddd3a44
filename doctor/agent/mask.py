"""Secret masking for every output format: what a report says must be safe to paste into a team chat.

Masked, wherever they appear (summaries, evidence, captured stdout/stderr, tracebacks, environment dumps, argv):
- the values of environment variables whose names look secret (HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY,
  PGPASSWORD, ...), taken from the environment given to `from_env` and from any secret-named key in the report;
- `NAME=value` / `"name": "value"` / `--name value` where NAME looks secret;
- the whole userinfo of a URL (`https://TOKEN@host`, `https://user:PASSWORD@host`; an ssh URL's login name
  stays, its password not) and `Authorization:` header values;
- PEM private key blocks;
- well-known token shapes (GitHub, Hugging Face, OpenAI/Anthropic, AWS access key ids, Slack, Google, GitLab,
  npm, PyPI, Stripe, JWTs).

Standard library only and Python 3.6 syntax (typing's generics written as strings, typing itself never imported,
no `from __future__ import annotations`): part of dfdoctor's agent, so the recorder, which runs under the job's
interpreter, masks with this same module. One set of rules for what dfdoctor prints and what it stores
(`dfdoctor.redact` adds the masking of a whole report).
`SecretPrints` keeps keyed fingerprints of a launch's secret values (never the values), so a later `status` or
`report` in a shell without them still masks them.
"""

import json
import os
import re
from collections.abc import Mapping

if False:  # annotations only (they are strings): typing was a tenth of the recorder's start
    from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

# base64, hashlib, hmac and urllib.parse are imported where a secret is there to encode or fingerprint: the
# recorder imports this module on every launch, most often for an environment with no secret in it

MASK = "***"

# A name looks secret when one of its words (split on _ - . and case changes) is one of these...
_SECRET_WORDS = frozenset({
    "token", "tokens", "secret", "secrets", "password", "passwords", "passwd", "pass", "passphrase", "pwd",
    "credential", "credentials", "creds", "key", "apikey", "privatekey", "auth", "authorization", "cookie",
    "signature", "sig", "dsn", "bearer", "otp", "pat",
})
# ...or it contains one of these anywhere (PGPASSWORD, HUGGINGFACEHUBTOKEN, MYAPIKEY).
_SECRET_INFIXES = ("token", "secret", "password", "passwd", "credential", "apikey", "api_key", "privatekey",
                   "private_key", "accesskey", "access_key")
# Names that match the words above but hold nothing secret; masking them would only hide useful facts.
_NOT_SECRET = frozenset({"pwd", "oldpwd", "ssh_auth_sock", "xauthority", "gpg_agent_info", "keytimeout",
                         "key_bindings", "tokenizers_parallelism", "pythonhashseed", "dbus_session_bus_address",
                         "passenger_app_env", "max_tokens", "num_tokens", "tokens_per_second"})
# Values too common to mask everywhere they appear (an env var HF_HUB_DISABLE_TOKEN=1 must not mask every "1").
_TRIVIAL = frozenset({"", "0", "1", "true", "false", "yes", "no", "on", "off", "none", "null", "nil", "n/a",
                      "unset", "default", "auto", "local", "localhost", "root", "admin", "user", "test"})
_MIN_VALUE_LEN = 4
# The shortest piece of a known secret masked on its own (Redactor.pieces): shorter ones say too little to hide.
_PIECE_MIN = 4
_SPACE = re.compile(r"\s")

# camelCase boundaries are marked before the split: Python 3.6's re.split ignores empty matches
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")


def name_looks_secret(name: str) -> bool:
    """Whether an environment variable, option or key name suggests its value is a secret."""
    low = name.lower().strip("-_ ")
    if not low or low in _NOT_SECRET:
        return False
    if low.endswith(("_file", "_path", "_dir", "_sock", "_socket", "_url_path")) or low.startswith("no_"):
        return False  # a path to a secret is not the secret
    if any(i in low for i in _SECRET_INFIXES):
        return True
    return any(w.lower() in _SECRET_WORDS for w in _NON_ALNUM.split(_CAMEL_BOUNDARY.sub("_", name)) if w)


# Lower-case words that code uses for other things (`sorted(x, key=...)`, `{"key": "timeout"}`, `pass`): on their
# own they mark a secret only when the value is quoted in an assignment, never as a bare dict key.
_GENERIC = frozenset({"key", "keys", "pass", "sig", "pat", "auth", "otp", "cookie"})


# A name whose last word is one of these holds a choice among named settings (RAY_AUTH_MODE=token,
# TOKEN_TYPE=Bearer, PASSWORD_METHOD=scram): its value is a setting's name, not a secret, so a word such as `token`
# is not masked in every sentence that says it. Only a plain word counts (`_CHOICE_VALUE`): anything that could be
# an opaque string under such a name is still masked.
_CHOICE_WORDS = frozenset({"mode", "type", "method", "scheme", "kind"})
_CHOICE_VALUE = re.compile(r"[A-Za-z][A-Za-z_-]{0,23}")


def holds_a_choice(name: str, value: str) -> bool:
    """Whether `name=value` names a setting (RAY_AUTH_MODE=token) rather than holding a secret."""
    words = [w for w in _NON_ALNUM.split(_CAMEL_BOUNDARY.sub("_", name)) if w]
    return bool(words) and words[-1].lower() in _CHOICE_WORDS and \
        bool(_CHOICE_VALUE.fullmatch(value.strip().rstrip(").]}")))  # prose closes a bracket after it


def key_looks_secret(name: str) -> bool:
    """Like `name_looks_secret`, but a bare generic word in lower case (a dict key `key`) does not count."""
    try:
        return _KEY_SEEN[name]
    except KeyError:
        pass
    said = name not in _GENERIC and name_looks_secret(name)
    if len(_KEY_SEEN) < 4096:
        _KEY_SEEN[name] = said
    return said


# key_looks_secret's answers: a report's keys are a few dozen names over and over (2,500 requirements in a report
# asked the same ~15 names 325,000 times, a third of its masking); bounded, as keys may be a user's own names.
_KEY_SEEN: "Dict[str, bool]" = {}


def value_is_maskable(value: str) -> bool:
    """Whether a secret value is distinctive enough to mask everywhere it appears."""
    v = value.strip()
    return len(v) >= _MIN_VALUE_LEN and v.lower() not in _TRIVIAL


# --- patterns that are secret whatever the environment says -------------------------------------------------------

_PRIVATE_KEY = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----.*?(?:-----END \1-----|\Z)", re.S)
_URL_PASSWORD = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/?#@'\"<>]*:)([^\s@/?#'\"<>]+)(@)")
# The whole userinfo of a URL: `https://TOKEN@host` and `https://TOKEN:@host` carry the secret as the user part.
# Not for the schemes whose user part is a login name (an ssh user, dfdoctor's own --target spellings): there only
# a password is masked (_URL_PASSWORD).
_URL_USERINFO = re.compile(r"\b((?![a-zA-Z0-9+.-]*(?:ssh|sftp|scp|pct|lxc|docker)://)[a-zA-Z][a-zA-Z0-9+.-]*://)"
                           r"([^\s/?#@'\"<>]+)(@)")
_AUTH_HEADER = re.compile(r"(?i)\b((?:proxy-)?authorization\s*[:=]\s*(?:(?:bearer|basic|token|digest)\s+)?)"
                          r"([^\s'\",;]+)")
_BEARER = re.compile(r"\b(Bearer\s+)([A-Za-z0-9._~+/-]{16,}=*)")
# Each shape: the literal start that names it, then its body. A token starts at a word boundary and takes every
# character of its kind that follows (no boundary is required after it: a token glued to `_tail` or ending in `-`
# is still a token).
TOKEN_SHAPES = (
    ("gh[pousr]_", "[A-Za-z0-9]{30,}"),                                # GitHub
    ("github_pat_", "[A-Za-z0-9_]{22,}"),
    ("hf_", "[A-Za-z0-9]{30,}"),                                       # Hugging Face
    ("sk-", "(?:ant-|proj-)?[A-Za-z0-9_-]{20,}"),                      # OpenAI, Anthropic
    ("(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)", "[0-9A-Z]{16}"),             # AWS access key ids
    ("xox[abposr]-", "[A-Za-z0-9-]{10,}"),                             # Slack
    ("AIza", "[0-9A-Za-z_-]{35}"),                                     # Google API keys
    ("glpat-", "[A-Za-z0-9_-]{20,}"),                                  # GitLab
    ("npm_", "[A-Za-z0-9]{36}"),                                       # npm
    ("pypi-AgE", "[A-Za-z0-9_-]{50,}"),                                # PyPI
    ("[rs]k_(?:live|test)_", "[A-Za-z0-9]{16,}"),                      # Stripe
    ("eyJ", "[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{8,}"),  # JWT
)
_TOKEN_SHAPES = re.compile("|".join(r"\b" + start + body for start, body in TOKEN_SHAPES))


def _literals(start: str) -> "List[str]":
    """Every literal a shape's start spells: its `[abc]` classes and `(?:x|y)` groups expanded."""
    out = [""]
    for group, chars, char in re.findall(r"\(\?:([^)]*)\)|\[([^\]]*)\]|(\\.|.)", start):
        options = group.split("|") if group else list(chars) if chars else [char.lstrip("\\")]
        out = [o + x for o in out for x in options]
    return out


_TOKEN_LITERALS = tuple(lit for start, _ in TOKEN_SHAPES for lit in _literals(start))


def _hits(s: str, literals: "Iterable[str]") -> "List[int]":
    """Where any of `literals` occurs in `s`, in order. str.find per literal runs at C speed; one regex
    alternation of them is tried at every position of the text, several times slower on a log."""
    found: Set[int] = set()
    for lit in literals:
        i = s.find(lit)
        while i >= 0:
            found.add(i)
            i = s.find(lit, i + 1)
    return sorted(found)


def _mask_tokens(s: str) -> str:
    """Token shapes masked, each tried only where one of their literal starts occurs (a scan for the starts
    alone is many times faster than trying every shape at every position)."""
    parts: List[str] = []
    done = 0
    for start in _hits(s, _TOKEN_LITERALS):
        if start < done:
            continue
        m = _TOKEN_SHAPES.match(s, start)
        if m:
            parts.append(s[done:m.start()])
            parts.append(MASK)
            done = m.end()
    parts.append(s[done:])
    return "".join(parts)


# NAME=value, NAME: value, "name": "value", --name=value, --name value, where NAME looks secret. The name must
# contain a secret-ish word so the regex skips ordinary words cheaply; `_assignment_ok` then decides.
_KEYWORD = r"(?i:token|secret|pass|pwd|credential|creds|key|auth|cookie|sig|dsn|bearer|otp|pat)"
_ASSIGNMENT = re.compile(
    # Tried only at the start of a word that contains a keyword, so 1 MiB of log is scanned in near
    # linear time; whitespace separates a value only after an option (`--token VALUE`).
    r"""(?<![\w.-])(?P<lead>(?P<q>["']?)(?P<name>(?P<dash>--?)?(?=[\w.-]*?""" + _KEYWORD + r""")[\w.-]+)"""
    r"""(?P=q)(?P<sep>\s*[=:]\s*|(?(dash)[ \t]+|(?!))))"""
    r"""(?:"(?P<v1>[^"\n]*)"|'(?P<v2>[^'\n]*)'|(?P<v3>[^\s"',;&]+))""")


# The same words, to find in a lower-cased text.
_KEYWORDS_LOWER = tuple(_KEYWORD[4:-1].split("|"))


def _mask_assignments(s: str) -> str:
    """`_ASSIGNMENT` tried only where it can match: at the start of each word that holds one of its keywords (or
    at the quote before it). Most lines of a training log hold none, and one anchored try per word is far cheaper
    than a scan of every position: this is what lets the recorder mask a stream as it relays it."""
    low = s.lower()
    if len(low) != len(s):  # lower() moved the offsets (a few Unicode letters do): the plain scan
        return _ASSIGNMENT.sub(_mask_assignment, s)
    parts: List[str] = []
    done = 0
    for p in _hits(low, _KEYWORDS_LOWER):
        if p < done:
            continue
        while p > done and (s[p - 1].isalnum() or s[p - 1] in "_.-"):
            p -= 1
        m = None
        for start in ((p - 1, p) if p > done and s[p - 1] in "\"'" else (p,)):
            m = _ASSIGNMENT.match(s, start)
            if m:
                break
        if m is None:
            continue
        parts.append(s[done:m.start()])
        parts.append(_mask_assignment(m))
        done = m.end()
    parts.append(s[done:])
    return "".join(parts)


def _mask_key_block(m: "re.Match[str]") -> str:
    """A PEM private key block reduced to its armour lines (a block cut off by trimming says so)."""
    end = f"-----END {m.group(1)}-----" if m.group(0).endswith("-----") else "(cut off)"
    return f"-----BEGIN {m.group(1)}----- {MASK} {end}"


_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")  # fn.forward, self.cache_key
_SNAKE = re.compile(r"_*[a-z][a-z0-9]*(?:_+[a-z0-9]+)+")  # module_cache_key: a variable, not an opaque secret


def _looks_like_code(name: str, value: str, spaced: bool) -> bool:
    """Whether `name = value` reads as source code (a traceback line), not a configured secret.

    Tracebacks quote code such as `cache_key = get_cache_key()` or `fn_key = fn.forward`; secrets are opaque
    strings. SHOUTING_NAMES (environment variables) and --options are always treated as configuration, and a
    snake_case value reads as a variable only in code's spaced `name = value`.
    """
    if not value_is_maskable(value):
        return True  # None, 0, True: nothing to hide
    if name.isupper() or name.startswith("-"):
        return False
    return (any(c in value for c in "()[]{}") or value.endswith(":") or value == name.split(".")[-1]
            or bool(_DOTTED.fullmatch(value)) or (spaced and bool(_SNAKE.fullmatch(value))))


def _assignment_ok(m: "re.Match[str]") -> bool:
    """Whether an assignment-shaped match really assigns a secret (and is not prose or a traceback)."""
    name, sep = m.group("name"), m.group("sep").strip()
    if not name_looks_secret(name):
        return False
    quoted = m.group("v1") is not None or m.group("v2") is not None
    if quoted and not (m.group("v1") or m.group("v2")):
        return False  # password = "": nothing to hide
    if holds_a_choice(name, next(v for v in m.group("v1", "v2", "v3") if v is not None)):
        return False  # RAY_AUTH_MODE=token: a setting's name
    if name in _GENERIC and not quoted:
        return False  # `key=lambda r: r.rank` in a traceback is code, not a secret
    if not quoted and _looks_like_code(name, m.group("v3"), spaced=m.group("sep") != m.group("sep").strip()):
        return False
    if sep == "=":
        return True
    if sep == ":":
        # "Authentication: failed" is prose; only quoted keys, SHOUTING_NAMES and options are config-like.
        return bool(m.group("q")) or (name.isupper() and "_" in name) or name.startswith("-")
    return name.startswith("-")  # whitespace: only `--token VALUE`


def _mask_assignment(m: "re.Match[str]") -> str:
    """The assignment with its value masked, quotes kept."""
    if not _assignment_ok(m):
        return m.group(0)
    if m.group("v1") is not None:
        return m.group("lead") + '"' + MASK + '"'
    if m.group("v2") is not None:
        return m.group("lead") + "'" + MASK + "'"
    return m.group("lead") + MASK


class Redactor:
    """Masks secrets in strings and in whole reports; one instance knows the secret values of one environment."""

    def __init__(self, secrets: "Optional[Mapping[str, str]]" = None) -> None:
        """`secrets` maps a label (usually the variable name) to a secret value that must never be shown."""
        self._secrets: Dict[str, str] = {}
        for label, value in (secrets or {}).items():
            self.add(label, value)
        self._pattern: Optional[re.Pattern[str]] = None
        self._pieces = None  # type: Optional[tuple]

    @classmethod
    def from_env(cls, env: "Mapping[str, str]") -> "Redactor":
        """A redactor for the values of every secret-looking variable in `env`."""
        return cls({k: v for k, v in env.items() if isinstance(v, str) and name_looks_secret(k)
                    and not holds_a_choice(k, v)})

    def add(self, label: str, value: str) -> None:
        """Also mask `value` (and its URL-encoded, JSON-escaped, hex and base64 forms) from now on."""
        if not isinstance(value, str) or not value_is_maskable(value):
            return
        from urllib.parse import quote

        forms = {value, value.strip(), quote(value, safe=""), json.dumps(value)[1:-1], *encoded_forms(value)}
        for form in forms:
            if value_is_maskable(form) and form not in self._secrets.values():
                self._secrets[f"{label}#{len(self._secrets)}" if form != value else label] = form
        self._pattern = None

    @property
    def labels(self) -> "List[str]":
        """The names whose values are masked (for saying what was masked, never the values)."""
        return sorted({k.split("#")[0] for k in self._secrets})

    def _value_pattern(self) -> "Optional[re.Pattern[str]]":
        if self._pattern is None and self._secrets:
            # Longest first, so a secret that contains another is masked whole.
            values = sorted(set(self._secrets.values()), key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(v) for v in values))
        return self._pattern

    def text(self, s: str) -> str:
        """`s` with every secret masked."""
        if not s or not isinstance(s, str):
            return s
        # Each pattern runs only where the literal it needs occurs: a stream of log lines is masked quickly.
        low = s.lower()
        if "-----begin" in low:
            s = _PRIVATE_KEY.sub(_mask_key_block, s)
        pattern = self._value_pattern()
        if pattern is not None:
            s = pattern.sub(MASK, s)
        if "://" in low:
            s = _URL_USERINFO.sub(lambda m: m.group(1) + (m.group(2) if m.group(2) == MASK else MASK) + m.group(3), s)
            s = _URL_PASSWORD.sub(lambda m: m.group(1) + MASK + m.group(3), s)
        if "authorization" in low:
            s = _AUTH_HEADER.sub(lambda m: m.group(1) + MASK, s)
        if "bearer" in low:
            s = _BEARER.sub(lambda m: m.group(1) + MASK, s)
        s = _mask_tokens(s)
        return _mask_assignments(s)

    def env(self, env: "Mapping[str, str]") -> "Dict[str, str]":
        """An environment dump with secret-named values replaced and other values masked as text."""
        return {k: (MASK if name_looks_secret(k) and isinstance(v, str) and v and not holds_a_choice(k, v)
                    else self.text(v)) for k, v in env.items()}

    def argv(self, argv: "Iterable[str]") -> "List[str]":
        """A command line with the value after `--token`/`--password`/... masked, and every word as text."""
        out: List[str] = []
        hide_next, option = False, ""
        for word in argv:
            if hide_next and isinstance(word, str) and not holds_a_choice(option, word):
                out.append(MASK)
            else:
                out.append(self.text(word) if isinstance(word, str) else word)
            hide_next = isinstance(word, str) and word.startswith("-") and "=" not in word \
                and name_looks_secret(word)
            option = word if isinstance(word, str) else ""
        return out

    def value(self, obj: "Any") -> "Any":
        """Any JSON-like value with every string masked: dict keys that look secret hide their whole value."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, Mapping):
            return {k: (MASK if isinstance(k, str) and isinstance(v, str) and v and key_looks_secret(k)
                        and not holds_a_choice(k, v) else self.value(v)) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            if obj and all(isinstance(x, str) for x in obj):
                return self.argv(obj)
            return [self.value(x) for x in obj]
        return obj

    def learn_argv(self, argv: "Iterable[str]") -> None:
        """Add the secret values a command line holds: the word after `--token`/`--password`/..., the value of
        `--token=V` and `NAME=V` words with secret names (also inside a `sh -c` line), URL passwords."""
        after_option, option = False, ""
        for word in argv:
            if not isinstance(word, str):
                after_option = False
                continue
            if after_option and not holds_a_choice(option, word):  # `--auth-mode token` names a setting
                self.add("argv", word)
            for m in _ASSIGNMENT.finditer(word):
                if _assignment_ok(m):
                    self.add(m.group("name").lstrip("-"), next(v for v in m.group("v1", "v2", "v3") if v is not None))
            for m in _URL_PASSWORD.finditer(word):
                self.add("url-password", m.group(2))
            for m in _URL_USERINFO.finditer(word):  # `https://TOKEN@` and `https://TOKEN:@`: the user part
                user, _, password = m.group(2).partition(":")
                if not password:
                    self.add("url-user", user)
            after_option, option = word.startswith("-") and "=" not in word and name_looks_secret(word), word

    @property
    def values(self) -> "List[str]":
        """The secret values (and their encoded forms) this redactor masks: for `SecretPrints.of`, never to show."""
        return sorted(set(self._secrets.values()))

    def held_back(self, masked: str) -> int:
        """How many characters at the end of an already masked stretch of a stream could be the start of a secret
        (of one of its forms): a stream's copy keeps them back until what follows shows whether it is one, so a
        secret written in pieces, however far apart in time, is still masked whole."""
        longest = 0
        for form in self._secrets.values():
            for k in range(min(len(form) - 1, len(masked)), longest, -1):
                if masked.endswith(form[:k]):
                    longest = k
                    break
        return longest

    def pieces(self, s: str) -> str:
        """`s` (a stretch of one output stream, already masked by `text`) with a piece of a known secret masked
        too where a write could have cut it: a secret's beginning that ends the stretch, a line or a word, and a
        secret's end that begins one. A job that writes half its token to stdout and the rest to stderr, or ends
        a line in the middle of it, leaves no half that two files would put back together. A piece counts from
        `_PIECE_MIN` characters and a third of the secret (a word that merely begins like a long token stays)."""
        if not s or not self._secrets:
            return s
        heads, tails = self._piece_sets()
        spans = []
        # each anchor (a piece's first or last _PIECE_MIN characters) found by str's own search: in the usual
        # output there is none, and the pieces are looked at only where one is
        for anchor in heads[0] | tails[0]:
            start = s.find(anchor)
            while start >= 0:
                # a beginning runs to the end of its word (the cut), an end from the start of its word: one
                # candidate each, looked up in the set of pieces
                if anchor in heads[0] and (start == 0 or not s[start - 1].isalnum()):
                    space = _SPACE.search(s, start)
                    stop = space.start() if space else len(s)
                    if s[start:stop] in heads[2]:
                        spans.append((start, stop))
                end = start + len(anchor)
                if anchor in tails[0] and (end == len(s) or not s[end].isalnum()):
                    lo = max(0, end - heads[1] - 1)
                    begin = max(s.rfind(c, lo, end) for c in " \t\n\r\f\v") + 1
                    if s[begin:end] in tails[2]:
                        spans.append((begin, end))
                start = s.find(anchor, start + 1)
        if not spans:
            return s
        out, at = [], 0
        for begin, stop in sorted(spans):
            if begin >= at:
                out.append(s[at:begin] + MASK)
                at = stop
            elif stop > at:
                at = stop
        return "".join(out) + s[at:]

    def _piece_sets(self) -> "Tuple[Tuple[Set[str], int, Set[str]], Tuple[Set[str], int, Set[str]]]":
        """For `pieces`: (the first _PIECE_MIN characters of each beginning, the longest piece, the beginnings of
        the secret's forms that count as pieces), and the same for their ends; made again when a secret is added."""
        if self._pieces is None or self._pieces[0] is not self._value_pattern():
            heads, tails, lengths = set(), set(), set()
            for form in set(self._secrets.values()):
                shortest = max(_PIECE_MIN, -(-len(form) // 3))
                for k in range(shortest, len(form)):
                    heads.add(form[:k])
                    tails.add(form[-k:])
                    lengths.add(k)
            longest = max(lengths, default=0)
            self._pieces = (self._value_pattern(), ({h[:_PIECE_MIN] for h in heads}, longest, heads),
                            ({t[-_PIECE_MIN:] for t in tails}, longest, tails))
        return self._pieces[1], self._pieces[2]

    def learn_prints(self, prints: "Optional[SecretPrints]", obj: "Any") -> None:
        """Add every substring of the strings in `obj` that `prints` recognises as a secret of the launch."""
        if prints is None:
            return
        for s in _strings(obj):
            for found in prints.find(s):
                self.add("launch-secret", found)

    def learn(self, obj: "Any") -> None:
        """Add the values of secret-named keys found anywhere in `obj` (e.g. a job's environment in a run record)."""
        if isinstance(obj, Mapping):
            for k, v in obj.items():
                if isinstance(k, str) and isinstance(v, str) and key_looks_secret(k):
                    if not holds_a_choice(k, v):
                        self.add(k, v)
                else:
                    self.learn(v)
        elif isinstance(obj, (list, tuple)):
            for x in obj:
                self.learn(x)


_B64_ALPHABETS = (b"+/", b"-_")  # standard and URL-safe
_MIN_CORE = _MIN_VALUE_LEN  # as distinctive as the shortest value masked in clear


def encoded_forms(value: str) -> "Set[str]":
    """The hex (both cases) and base64 (standard and URL-safe, at each of the three alignments a value can have
    inside a longer base64 text) forms of a secret. For an alignment, only the letters that hold the value's
    bits alone are a fixed string; the one letter at each edge also holds its neighbours' bits."""
    import base64

    raw = value.encode("utf-8", "surrogatepass")
    forms = {raw.hex(), raw.hex().upper()}
    for alphabet in _B64_ALPHABETS:
        forms.add(base64.b64encode(raw, altchars=alphabet).decode())
        for offset in range(3):
            text = base64.b64encode(b"\0" * offset + raw + b"\0\0", altchars=alphabet).decode()
            first = -(-offset * 8 // 6)  # the first letter made only of the value's bits
            last = (offset + len(raw)) * 8 // 6  # one past the last such letter
            if last - first >= _MIN_CORE:
                forms.add(text[first:last])
    return forms


def _strings(obj: "Any") -> "Iterable[str]":
    """Every string in a JSON-like value, keys included."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _strings(x)


# --- keyed fingerprints: finding a launch's secrets again without keeping them ------------------------------------

_P = (1 << 61) - 1  # a Mersenne prime: the rolling hash's modulus


class SecretPrints:
    """Keyed fingerprints of secret values: enough to find those values again in a text, not to show them.

    Kept per value: its length, a 16-bit rolling fingerprint (it narrows the search: one window in 65,536 is
    confirmed) and an HMAC-SHA256 digest that confirms a candidate. Both are made with a random 256-bit key of the
    launch that `to_dict` leaves out: it is kept apart from the fingerprints (run/masks.py keeps it in the user's
    private cache, never in the run folder). Without the key, the fingerprints test no guess at all, however
    short the value: nothing in them can be searched, fast or slow. With the key, a guess costs one HMAC.
    """

    MIN_LENGTH = _MIN_VALUE_LEN
    FP_BITS = 16
    VERSION = 2

    def __init__(self, key: bytes, prints: "Iterable[Tuple[int, int, str]]") -> None:
        import hashlib
        import hmac

        self.key = key
        # The rolling hash's base comes from the key: without it, the 16 bits say nothing about a value.
        self.base = int.from_bytes(hmac.new(key, b"base", hashlib.sha256).digest()[:8], "big") % (_P - 2) + 2
        self.prints: Dict[int, Dict[int, Set[str]]] = {}  # length -> fingerprint -> digests
        for length, fp, digest in prints:
            self.prints.setdefault(int(length), {}).setdefault(int(fp), set()).add(str(digest))

    @classmethod
    def of(cls, values: "Iterable[str]", key: "Optional[bytes]" = None) -> "SecretPrints":
        """Fingerprints of `values` under `key` (default: a fresh random one); values shorter than MIN_LENGTH
        are left out."""
        made = cls(key or os.urandom(32), ())
        for v in values:
            if isinstance(v, str) and len(v) >= cls.MIN_LENGTH:
                made.prints.setdefault(len(v), {}).setdefault(made._fp(v), set()).add(made._digest(v))
        return made

    def __bool__(self) -> bool:
        return bool(self.prints)

    def _fp(self, s: str) -> int:
        h = 0
        for c in s:
            h = (h * self.base + ord(c)) % _P
        return h & ((1 << self.FP_BITS) - 1)

    def _digest(self, s: str) -> str:
        import hashlib
        import hmac

        return hmac.new(self.key, s.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:32]

    def find(self, text: str) -> "Set[str]":
        """The substrings of `text` that are fingerprinted secrets."""
        found: Set[str] = set()
        if not isinstance(text, str):
            return found
        mask = (1 << self.FP_BITS) - 1
        codes = [ord(c) for c in text]
        for length, fps in self.prints.items():
            if length > len(codes):
                continue
            top = pow(self.base, length - 1, _P)
            h = 0
            for c in codes[:length]:
                h = (h * self.base + c) % _P
            for i in range(len(codes) - length + 1):
                if i:
                    h = ((h - codes[i - 1] * top) * self.base + codes[i + length - 1]) % _P
                digests = fps.get(h & mask)
                if digests is not None:
                    window = text[i:i + length]
                    if window not in found and self._digest(window) in digests:
                        found.add(window)
        return found

    def to_dict(self) -> "Dict[str, Any]":
        """The JSON form kept in a run folder (`masks.json`): the fingerprints, without the key or any value."""
        return {"version": self.VERSION,
                "prints": sorted([length, fp, d] for length, fps in self.prints.items() for fp, ds in fps.items()
                                 for d in ds)}

    @classmethod
    def from_dict(cls, doc: "Any", key: bytes) -> "Optional[SecretPrints]":
        """Fingerprints read back from `to_dict`'s form with their key; None for anything else (an older form
        included: its salted digests are not read)."""
        try:
            if int(doc["version"]) != cls.VERSION or not key:
                return None
            return cls(key, [(int(a), int(b), str(c)) for a, b, c in doc["prints"]])
        except (KeyError, TypeError, ValueError):
            return None
