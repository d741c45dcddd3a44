"""What the recorder writes into the run folder: the append-only record, the capped stream copies, both masked,
and the room kept back for the record when the file system fills up. Standard library only."""

import errno
import json
import os
import time

HEAD_CAP = 4 << 20  # bytes of each stream kept from the start
SEG_CAP = 1 << 20  # bytes per tail segment; two segments keep the newest 1-2 MiB
RESERVE_BYTES = 64 << 10  # room kept in the run folder for the record when its file system fills up
PENDING_CAP = 64 << 10  # bytes of an unfinished line held back so a secret is never masked in two halves


# The job's environment is recorded only as far as a diagnosis reads it (docs/files.md lists these): a variable
# named here, or one that begins with a prefix here. Anything else (a webhook URL, a database conninfo) never
# reaches the run folder, whatever its name or shape. Readers: diagnose/rules_runtime.py (CUDA_VISIBLE_DEVICES,
# the proxies and HF_ENDPOINT/HF_HUB_OFFLINE), download_cache.py (tiktoken's TIKTOKEN_CACHE_DIR), stuck.py and the
# rank readers (RANK and its kin, which they read from /proc of the live job, not from here), and the person
# reading record.jsonl.
KEPT_ENV_PREFIXES = ("CUDA_", "NCCL_", "TORCH_", "TORCHELASTIC_", "PYTORCH_", "PYTHON", "SLURM_", "OMP_", "NVIDIA_",
                     "GLOO_", "MKL_")
KEPT_ENV_NAMES = frozenset((
    "PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "TMPDIR",
    "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "NODE_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
    "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
    "HF_ENDPOINT", "HF_HUB_OFFLINE", "HF_HOME", "HF_HUB_CACHE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE",
    "TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR",  # tiktoken's cache of its BPE files (diagnose/download_cache.py)
    "RAY_ADDRESS",  # the Ray cluster a driver is meant to join (diagnose/ray_driver.py)
))
PROXY_NAMES = frozenset(n for p in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy")
                        for n in (p, p.upper()))


def kept_env(env, secret_name=lambda name: False):
    """The part of `env` a diagnosis reads: the names above, never one whose name looks secret (a Hugging Face
    key among the HF_ names), proxies with their credentials cut out (`http://user:pw@proxy:3128` -> `http://***@proxy:3128`)."""
    out = {}
    for k, v in env.items():
        if secret_name(k):
            continue
        if k in PROXY_NAMES:
            out[k] = _without_credentials(v)
        elif k in KEPT_ENV_NAMES or k.startswith(KEPT_ENV_PREFIXES):
            out[k] = v
    return out


def _without_credentials(value):
    """A proxy URL (or a comma list of them, as no_proxy) with every `user[:password]@` replaced by `***@`."""
    parts = []
    for part in value.split(","):
        scheme, sep, rest = part.rpartition("://")
        host = rest.split("/", 1)[0]
        if "@" in host:
            rest = "***@" + rest[len(host.rsplit("@", 1)[0]) + 1:]
        parts.append(scheme + sep + rest)
    return ",".join(parts)


class Masker:
    """What the recorder writes down, masked: the secrets of its environment and of the job's argv, and the
    patterns every dfdoctor output is masked by (`dfdoctor.agent.mask`). Without the rules (a broken copy) every
    string is hidden."""

    def __init__(self, argv=(), env=None):
        try:
            from dfdoctor.agent.mask import Redactor  # here: a copy without the rules must still record

            red = Redactor.from_env(dict(os.environ if env is None else env))
            red.learn_argv(list(argv or ()))
            self.redactor = red
        except Exception as exc:  # never a plain record: mask all, and say why
            self.redactor = None
            self.error = "%s: %s" % (type(exc).__name__, exc)

    def value(self, obj):
        """A JSON-like value with every secret masked."""
        if self.redactor is not None:
            return self.redactor.value(obj)
        if isinstance(obj, str):
            return "***" if obj else obj
        if isinstance(obj, dict):
            return {k: self.value(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.value(x) for x in obj]
        return obj

    def env(self, env):
        """The part of an environment a diagnosis reads (`kept_env`), secret values masked in it too."""
        if self.redactor is None:
            return {k: "***" for k in kept_env(env)}
        from dfdoctor.agent.mask import name_looks_secret  # here: a copy without the rules must still record

        return self.redactor.env(kept_env(env, name_looks_secret))

    def data(self, data, pieces=True):
        """Bytes the job wrote, masked (undecodable bytes kept as they are), pieces of a known secret too: the
        rest of it may have gone to the other stream (`mask.Redactor.pieces`)."""
        if self.redactor is None:
            return b"*** (output not kept: masking rules unavailable)\n" if data else data
        text = self.redactor.text(data.decode("utf-8", "surrogateescape"))
        return (self.redactor.pieces(text) if pieces else text).encode("utf-8", "surrogateescape")

    def pieces(self, masked):
        """Masked bytes with the pieces of a known secret masked too (`mask.Redactor.pieces`)."""
        if self.redactor is None or not masked:
            return masked
        text = masked.decode("utf-8", "surrogateescape")
        return self.redactor.pieces(text).encode("utf-8", "surrogateescape")

    def held_back(self, masked):
        """How many bytes at the end of masked output could begin a secret (redact.Redactor.held_back)."""
        if self.redactor is None or not masked:
            return 0
        text = masked.decode("utf-8", "surrogateescape")
        held = self.redactor.held_back(text)
        return len(text[len(text) - held:].encode("utf-8", "surrogateescape")) if held else 0


class RunDirSpace:
    """Room kept back in the run folder for the record's last words. A full file system there (the job's own
    output filled it, or anything else did) must not cost the record its heartbeat and the job's exit: the
    first write that fails for want of space frees the reserve, and from then on the stream copies stop (their
    byte counts go on) so what is freed goes to the record."""

    NAME = ".reserve"

    def __init__(self, run_dir):
        self.path = os.path.join(run_dir, self.NAME)
        self.full = None  # the first ENOSPC/EDQUOT, once seen
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, b"\0" * RESERVE_BYTES)
            finally:
                os.close(fd)
        except OSError:
            self.release()  # no room even for the reserve: whatever part was written is no use

    def hit(self, exc):
        """Whether `exc` is a want of space; the first one frees the reserve."""
        if getattr(exc, "errno", None) not in (errno.ENOSPC, errno.EDQUOT):
            return False
        if self.full is None:
            self.full = (exc.errno, time.time())
            self.release()
        return True

    def release(self):
        try:
            os.unlink(self.path)
        except OSError:
            pass


class Record:
    """The append-only record: each event one JSON line, written by one O_APPEND write, masked."""

    def __init__(self, path, masker=None, space=None):
        """Open the record for appending (created if missing)."""
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.masker = masker
        self.space = space

    def event(self, name, sync=False, **data):
        """Append one event with its wall-clock time; fsync the ones a reboot must not lose."""
        if self.masker is not None:
            data = self.masker.value(data)
        data["t"] = round(time.time(), 6)
        data["event"] = name
        rest = (json.dumps(data, default=str, sort_keys=True) + "\n").encode()
        for _ in range(2):  # once more when the first failure freed the reserve
            try:
                while rest:  # a disk that fills mid-line writes part of it: the rest follows, or the line is torn
                    rest = rest[os.write(self.fd, rest):]
                if sync:
                    os.fsync(self.fd)
                return
            except OSError as exc:  # a full disk must not stop us relaying the job's output
                if self.space is None or not self.space.hit(exc):
                    return


class CappedCopy:
    """A capped on-disk copy of one stream, masked: the first HEAD_CAP bytes, then two alternating tail segments.

    Masking goes line by line (an unfinished line waits, up to PENDING_CAP, for its end or the next tick), so a
    secret written in pieces is still seen whole; what is kept of an unfinished line stops short of an end that
    could begin a secret, which waits for the rest however long it takes."""

    def __init__(self, run_dir, name, masker=None, space=None):
        """Open the head file; tail segments open when the head is full."""
        self.masker = masker
        self.space = space
        self.pending = b""
        self.pending_ticks = 0
        self.base = os.path.join(run_dir, name)
        self.head = os.open(self.base + ".log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.head_len = 0
        self.seg = None
        self.seg_index = 1
        self.seg_len = 0
        self.total = 0

    def write(self, data):
        """Keep `data`, masked, up to its last complete line; the rest waits for its end."""
        self.total += len(data)
        if self.masker is None:
            self._keep(data)
            return
        data = self.pending + data
        cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        self.pending_ticks = 0
        if len(data) - cut > PENDING_CAP:
            self.pending = b""
            self._keep_masked(data)
            return
        self.pending = data[cut:]
        if cut:
            self._keep(self.masker.data(data[:cut]))

    def tick(self, final=False):
        """An unfinished line that waited a whole tick (a prompt, a progress bar) is kept, but for its end
        when that could be the start of a secret; at the end (`final`) whatever waits is kept."""
        self.pending_ticks += 1
        if self.pending and (final or self.pending_ticks > 1):
            data, self.pending = self.pending, b""
            if self.masker is None:
                self._keep(data)
            else:
                self._keep_masked(data, final)

    def _keep_masked(self, data, final=False):
        """Keep `data` masked, all but its end when that could begin a secret: that end waits (in `pending`)
        for what follows, so a secret cut by a flush, whether by time or by size, is masked whole. Pieces of a
        secret are masked in what is kept only (the end that waits may still be completed)."""
        masked = self.masker.data(data, pieces=False)
        held = 0 if final else self.masker.held_back(masked)
        if held:
            self.pending, masked = masked[-held:], masked[:-held]
        self._keep(self.masker.pieces(masked))

    def _keep(self, data):
        """Write `data`: in the head while it has room, else in the current tail segment; nothing once the run
        folder is full (what is left there is the record's)."""
        if self.space is not None and self.space.full:
            return
        try:
            room = HEAD_CAP - self.head_len
            if room > 0:
                os.write(self.head, data[:room])
                self.head_len += min(room, len(data))
                data = data[room:]
            while data:
                if self.seg is None or self.seg_len >= SEG_CAP:
                    self._rotate()
                part = data[: SEG_CAP - self.seg_len]
                os.write(self.seg, part)
                self.seg_len += len(part)
                data = data[len(part):]
        except OSError as exc:
            if self.space is not None:
                self.space.hit(exc)

    def _rotate(self):
        """Start the other tail segment afresh: the older bytes in it are the ones we drop."""
        if self.seg is not None:
            os.close(self.seg)
        self.seg_index = 1 - self.seg_index
        self.seg = os.open("%s.tail.%d" % (self.base, self.seg_index),
                           os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        self.seg_len = 0
