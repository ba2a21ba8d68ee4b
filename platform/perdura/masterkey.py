"""The master key that wraps every namespace data key (envelope encryption, DESIGN.md rule 6)."""

from __future__ import annotations

import base64
import binascii
import functools
import os

from django.core.exceptions import ImproperlyConfigured

from perdura import env


def _decode(text: str) -> bytes:
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ImproperlyConfigured("PERDURA_MASTER_KEY must be 32 bytes, base64-encoded") from None
    if len(key) != 32:
        raise ImproperlyConfigured(
            f"PERDURA_MASTER_KEY must be 32 bytes, base64-encoded (got {len(key)} bytes)"
        )
    return key


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
