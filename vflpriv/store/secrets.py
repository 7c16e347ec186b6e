"""The canary key: a secret the active party holds and no attack can replay, from which the canaries' labels are drawn.

Everything else about a run is a function of its public configuration and seed, which a real adversary may know (the
protocol) and an attack plugin can read; canary labels drawn from that seed could be replayed by rebuilding the
scenario. They are drawn instead from a stream keyed by this key and the seed (``canary_stream``), so an attack that
replays the scenario gets other labels, while the same configuration, seed and key give the same numbers.

Where it comes from: ``$VFLPRIV_CANARY_KEY`` (64 hex digits) if set, else the file ``canary-key`` in the cache root
(``$VFLPRIV_CACHE``), created from 32 bytes of OS entropy on first use (atomically: parallel workers that start
together all read the one that was written first). Runs record its fingerprint (``canary_key``, a hash that reveals
nothing of it): reproduce them elsewhere by copying the file or setting the variable to it, and give a cluster's
workers the same key (the variable, or a shared cache root). A key file that does not check out is reported with a
warning, replaced by a fresh key and never used; a malformed variable is refused. Stored runs whose canaries another
key drew are refused by a command that would resume them (``tradeoff.gap.refuse_other_canary_key``), never reused.
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings

import torch

from vflpriv.common.errors import ConfigError
from vflpriv.store.cache import cache_root

ENV_VAR = "VFLPRIV_CANARY_KEY"
FILE = "canary-key"
_HEADER = "vflpriv canary key v1"
_HEX = re.compile(r"[0-9a-f]{64}")


def _parse(text: str) -> bytes | None:
    """The key of a key file's text, None when it does not check out (header, 64 hex digits, their checksum)."""
    lines = text.splitlines()
    if len(lines) != 3 or lines[0] != _HEADER or not _HEX.fullmatch(lines[1]):
        return None
    if hashlib.sha256(lines[1].encode()).hexdigest() != lines[2]:
        return None
    return bytes.fromhex(lines[1])


def _write_new(path) -> None:
    """A fresh key in ``path`` unless one is there: written to a temporary name and linked (no clobbering)."""
    key = os.urandom(32).hex()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{_HEADER}\n{key}\n{hashlib.sha256(key.encode()).hexdigest()}\n")
    os.chmod(tmp, 0o600)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass  # another process wrote one first: everyone uses that one
    finally:
        tmp.unlink(missing_ok=True)


def canary_key() -> bytes:
    """The key (see the module docstring)."""
    given = os.environ.get(ENV_VAR)
    if given is not None:
        if not _HEX.fullmatch(given.strip().lower()):
            raise ConfigError(f"${ENV_VAR} must be 64 hexadecimal digits (32 bytes), got {len(given.strip())} "
                              "characters; unset it to use the key in the cache root")
        return bytes.fromhex(given.strip().lower())
    path = cache_root() / FILE
    if not path.is_file():
        _write_new(path)
    key = _parse(path.read_text(errors="replace"))
    if key is None:
        warnings.warn(f"canary key {path} does not check out (damaged or not a key file): replaced by a fresh key; "
                      "canary runs from now on draw other labels", stacklevel=2)
        path.unlink(missing_ok=True)
        _write_new(path)
        key = _parse(path.read_text(errors="replace"))
    return key


def current_fingerprint() -> str:
    """The fingerprint of the key a run would draw its canaries with now, '' where none is made yet; read without
    creating or replacing one (a planning check, a dry run)."""
    if os.environ.get(ENV_VAR) is not None:
        return fingerprint(canary_key())  # the variable: checked, nothing written
    path = cache_root() / FILE
    key = _parse(path.read_text(errors="replace")) if path.is_file() else None
    return fingerprint(key) if key is not None else ""


def fingerprint(key: bytes) -> str:
    """A short public name of ``key`` (its hash, which reveals nothing of it): what records store."""
    return hashlib.sha256(b"vflpriv canary key fingerprint" + key).hexdigest()[:16]


def canary_stream(key: bytes, seed: int) -> torch.Generator:
    """The generator of the canaries' labels of the run seeded ``seed``: keyed by the secret, so not replayable."""
    digest = hashlib.sha256(key + b"canary labels" + int(seed).to_bytes(8, "little", signed=True)).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))
