"""The launch's secrets, as a run folder keeps them: masked wherever they are written, and kept as keyed
fingerprints in RUN_DIR/masks.json (never the values), so a later `status` or `report` in a shell without them
still masks them. The fingerprints' key is kept apart, in this user's private cache."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

from dfdoctor.cache import cache_dir, private_dir
from dfdoctor.redact import Redactor, SecretPrints
from dfdoctor.agent.names import MASKS

KEYS_SUBDIR = "masks"  # under the cache folder: the fingerprints' keys, one per run, never in a run folder


def masker(env: Optional[dict[str, str]] = None, argv: Any = ()) -> Redactor:
    """The redactor for what dfdoctor keeps of a run: the secrets of `env` (default: ours) and of the job's
    argv, by the rules of every output."""
    red = Redactor.from_env(dict(os.environ if env is None else env))
    red.learn_argv([w for w in argv or () if isinstance(w, str)])
    return red


def masked(obj: Any, env: Optional[dict[str, str]] = None, argv: Any = ()) -> Any:
    """A JSON-like value as a run folder may keep it: secrets masked."""
    return masker(env, argv).value(obj)


def _key_file(key_id: str) -> Path:
    return cache_dir() / KEYS_SUBDIR / f"{key_id}.key"


def keep_prints(run_dir: Path, env: dict[str, str], argv: list[str]) -> None:
    """Keep the launch's secrets (its environment's and its argv's) as keyed fingerprints in RUN_DIR/masks.json,
    so a later `status` or `report` in a shell without them still masks them; no file here holds a value.

    The fingerprints' key is kept apart, in this user's private cache (KEYS_SUBDIR, 0700, the key 0600), named by
    a random id that masks.json holds: the run folder alone lets no one test a guess. A cache that cannot be
    written keeps no key, and then no fingerprints (later masking goes by names and shapes only)."""
    key, key_id = os.urandom(32), os.urandom(16).hex()  # secrets.token_hex(16), without importing hmac and OpenSSL
    try:
        private_dir(_key_file(key_id).parent)
        fd = os.open(_key_file(key_id), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
        doc = {"key_id": key_id, **SecretPrints.of(masker(env, argv).values, key).to_dict()}
    except OSError:
        doc = {"key_id": None, "prints": []}
    fd = os.open(Path(run_dir) / MASKS, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f)


def load_prints(run_dir: Path) -> Optional[SecretPrints]:
    """The launch's secret fingerprints kept in the run folder, with their key from this user's cache; None
    when either is missing."""
    try:
        doc = json.loads((Path(run_dir) / MASKS).read_text())
        key_id = str(doc.get("key_id") or "")
        if not key_id.isalnum() or not key_id.isascii():
            return None
        return SecretPrints.from_dict(doc, _key_file(key_id).read_bytes())
    except (OSError, ValueError, AttributeError):
        return None


def forget_prints(run_dir: Path) -> None:
    """Delete the key of a run's fingerprints (when the run folder goes)."""
    try:
        key_id = str(json.loads((Path(run_dir) / MASKS).read_text()).get("key_id") or "")
        if key_id.isalnum() and key_id.isascii():
            _key_file(key_id).unlink()
    except (OSError, ValueError, AttributeError):
        pass
