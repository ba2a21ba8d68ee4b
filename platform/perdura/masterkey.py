"""The master key that wraps every namespace data key (envelope encryption, DESIGN.md rule 6)."""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os

from django.core.exceptions import ImproperlyConfigured

from perdura import env


def _decode(text: str, name: str = "PERDURA_MASTER_KEY") -> bytes:
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ImproperlyConfigured(f"{name} must be 32 bytes, base64-encoded") from None
    if len(key) != 32:
        raise ImproperlyConfigured(f"{name} must be 32 bytes, base64-encoded (got {len(key)} bytes)")
    return key


def key_id(key: bytes) -> str:
    """A master key's public name: stored beside each data key it wraps, so the right one unwraps it
    while a rotation is under way. A hash prefix: it tells nothing about the key."""
    return hashlib.sha256(b"perdura/masterkey-id/" + key).hexdigest()[:16]


def generate() -> str:
    """A new random master key, base64-encoded (what `perdura masterkey` prints)."""
    return base64.b64encode(os.urandom(32)).decode()


@functools.cache
def master_key() -> bytes:
    """The master key from PERDURA_MASTER_KEY; in dev, generated once and kept under the data folder."""
    configured = env.master_key()
    if configured:
        return _decode(configured)
    if not env.dev_mode():
        raise ImproperlyConfigured(
            "PERDURA_MASTER_KEY is not set. Generate one with `perdura masterkey` and keep it safe: "
            "without it no stored history can be read."
        )
    path = env.data_dir() / "master.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(generate() + "\n")
    return _decode(path.read_text())


@functools.cache
def previous_master_key() -> bytes | None:
    """The master key being rotated away from (PERDURA_MASTER_KEY_PREVIOUS), if any."""
    configured = env.previous_master_key()
    return _decode(configured, "PERDURA_MASTER_KEY_PREVIOUS") if configured else None


def known_keys() -> dict[str, bytes]:
    """The master keys this process can unwrap with, by id: the current one, then the previous one."""
    keys = {key_id(master_key()): master_key()}
    previous = previous_master_key()
    if previous is not None:
        keys.setdefault(key_id(previous), previous)
    return keys
