"""The installation's export signing key (Ed25519): from PERDURA_EXPORT_SIGNING_KEY, or generated in dev.

Kept as the master key is (platform/perdura/masterkey.py): production reads it from the environment;
`perdura dev` (and the CLI against a dev database) generates one on first use and keeps it under the
data folder, mode 0600. No Django here: `perdura export key` prints the public half without a database.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from perdura import env

ENV_VAR = "PERDURA_EXPORT_SIGNING_KEY"
DEV_FILE = "export-signing.key"


class SigningKeyError(RuntimeError):
    """The signing key is missing or unreadable."""


def generate() -> str:
    """A new key as `perdura export keygen` prints it: the base64 of the 32-byte Ed25519 seed."""
    raw = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return base64.b64encode(raw).decode()


def parse(text: str) -> Ed25519PrivateKey:
    """A private key from its base64 seed (what `keygen` prints) or an unencrypted PKCS#8 PEM.

    Raises:
        SigningKeyError: neither.
    """
    text = text.strip()
    if text.startswith("-----BEGIN"):
        try:
            key = serialization.load_pem_private_key(text.encode(), password=None)
        except (ValueError, TypeError) as e:
            raise SigningKeyError(f"{ENV_VAR} is not a readable PEM private key: {e}") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise SigningKeyError(f"{ENV_VAR} must be an Ed25519 key")
        return key
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise SigningKeyError(
            f"{ENV_VAR} must be a base64 32-byte Ed25519 seed (`perdura export keygen`) or a PKCS#8 PEM"
        )
    return Ed25519PrivateKey.from_private_bytes(raw)


@functools.cache
def signing_key() -> Ed25519PrivateKey:
    """The installation's key: PERDURA_EXPORT_SIGNING_KEY, or in dev the one kept under the data folder.

    Raises:
        SigningKeyError: not configured outside dev, or unreadable.
    """
    configured = os.environ.get(ENV_VAR, "").strip()
    if configured:
        return parse(configured)
    if not env.dev_mode():
        raise SigningKeyError(
            f"{ENV_VAR} is not set. Generate one with `perdura export keygen`, keep it as you keep "
            "PERDURA_MASTER_KEY, and publish its public half (`perdura export key`)."
        )
    path = env.data_dir() / DEV_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process of the same dev installation made it first
        else:
            with os.fdopen(fd, "w") as f:
                f.write(generate() + "\n")
    return parse(path.read_text())
