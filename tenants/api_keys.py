"""API key format, hashing and parsing: pure functions, no database.

A key reads `pdk_<prefix>_<secret>`: the prefix (12 lowercase base32 characters, 60 bits) is public
and finds the row; the secret is 32 random bytes (256 bits). Only SHA-256 of the whole key is kept.
A fast hash is right here, unlike for passwords: slow hashes (bcrypt, argon2) exist to make guessing
low-entropy secrets expensive, and nobody can guess 256 random bits however fast the hash is, while a
slow hash would cost tens of milliseconds on every RPC. Comparison is constant-time all the same.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

SCHEME = "pdk"
_PREFIX_CHARS = 12
_KEY_RE = re.compile(r"^pdk_([a-z2-7]{12})_([A-Za-z0-9_-]{43})$")
_PREFIX_RE = re.compile(r"^(?:pdk_)?([a-z2-7]{12})$")
_DURATION_RE = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


@dataclass(frozen=True, slots=True)
class NewKey:
    """A freshly generated key: `plaintext` is shown once and never stored."""

    prefix: str
    plaintext: str
    secret_hash: str


@dataclass(frozen=True, slots=True)
class ParsedKey:
    """A key as presented by a caller, split into its lookup prefix and the whole key to verify."""

    prefix: str
    plaintext: str


def generate() -> NewKey:
    """A new random key with its prefix and hash."""
    prefix = base64.b32encode(secrets.token_bytes(8)).decode().lower()[:_PREFIX_CHARS]
    secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
    plaintext = f"{SCHEME}_{prefix}_{secret}"
    return NewKey(prefix=prefix, plaintext=plaintext, secret_hash=hash_key(plaintext))


def hash_key(plaintext: str) -> str:
    """The stored form of a key: hex SHA-256."""
    return hashlib.sha256(plaintext.encode()).hexdigest()


def verify(plaintext: str, secret_hash: str) -> bool:
    """True when `plaintext` hashes to `secret_hash`, compared in constant time."""
    return hmac.compare_digest(hash_key(plaintext), secret_hash)


def _bearer(value: str) -> str:
    value = value.strip()
    scheme, _, rest = value.partition(" ")
    return rest.strip() if rest and scheme.lower() == "bearer" else value


def claims_perdura(value: str) -> bool:
    """`value` (a key or an `authorization` header value) is meant as a Perdura key, well-formed or not."""
    return _bearer(value).startswith(SCHEME + "_")


def parse(value: str) -> ParsedKey | None:
    """The key in `value` (a bare key or an `authorization` header value), or None if it is not one."""
    value = _bearer(value)
    match = _KEY_RE.match(value)
    if match is None:
        return None
    return ParsedKey(prefix=match.group(1), plaintext=value)


def parse_prefix(value: str) -> str | None:
    """The lookup prefix named by `value`: a whole key, `pdk_<prefix>` or the bare prefix."""
    parsed = parse(value)
    if parsed is not None:
        return parsed.prefix
    match = _PREFIX_RE.match(value.strip())
    return match.group(1) if match else None


def display(prefix: str) -> str:
    """How a key is named in lists, logs and errors: its public prefix only."""
    return f"{SCHEME}_{prefix}"


def format_duration(duration: timedelta) -> str:
    """The largest whole unit that states `duration` exactly: `7d`, `12h`, `90m`, `30s` (parse_duration's
    inverse for whole seconds)."""
    seconds = int(duration.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def parse_duration(text: str) -> timedelta:
    """`30d`, `12h`, `2w`, `90m`, `45s` as a timedelta.

    Raises:
        ValueError: the text is not a positive count followed by one of s, m, h, d, w.
    """
    match = _DURATION_RE.match(text.strip())
    if match is None or int(match.group(1)) <= 0:
        raise ValueError(
            f"{text!r} is not a duration: use a positive number followed by s, m, h, d or w (e.g. 30d)"
        )
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
