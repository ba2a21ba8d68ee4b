"""Client-side payload encryption for Perdura (or any Temporal server): a PayloadCodec that seals every
payload with AES-256-GCM before it leaves the client, so the server stores and forwards only ciphertext.

Give the same codec to every client and worker of the namespace:

    client = await Client.connect(
        "127.0.0.1:7233",
        data_converter=dataclasses.replace(DataConverter.default, payload_codec=EncryptionCodec.from_env()),
    )

The key (32 random bytes, base64 in CODEC_KEY) never reaches the server. Perdura's own encryption at rest
still applies underneath; this layer keeps payloads unreadable to whoever runs the server, too. The web
console shows such payloads decoded only through the namespace's codec server (codec_server.py here).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Sequence

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

ENCODING = b"binary/encrypted"
NONCE_BYTES = 12


class EncryptionCodec(PayloadCodec):
    """Seals each whole Payload (metadata and data) under `key`; the key id is bound as associated data,
    so a payload cannot be opened under another key id, and a changed byte fails to open."""

    def __init__(self, key: bytes, key_id: str = "default") -> None:
        if len(key) != 32:
            raise ValueError("the key must be 32 bytes (AES-256)")
        self._aead = AESGCM(key)
        self.key_id = key_id

    @classmethod
    def from_env(cls) -> EncryptionCodec:
        """The codec of CODEC_KEY (base64 of 32 bytes) and CODEC_KEY_ID (default `default`)."""
        try:
            key = base64.b64decode(os.environ["CODEC_KEY"], validate=True)
        except KeyError:
            raise SystemExit("set CODEC_KEY to base64 of 32 random bytes (openssl rand -base64 32)") from None
        except binascii.Error:
            raise SystemExit("CODEC_KEY is not base64") from None
        return cls(key, os.environ.get("CODEC_KEY_ID", "default"))

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.seal(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.open(p) for p in payloads]

    def seal(self, payload: Payload) -> Payload:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, payload.SerializeToString(), self.key_id.encode())
        return Payload(
            metadata={"encoding": ENCODING, "encryption-key-id": self.key_id.encode()}, data=nonce + sealed
        )

    def open(self, payload: Payload) -> Payload:
        """The original payload; one not sealed by this codec passes through unchanged."""
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        key_id = payload.metadata.get("encryption-key-id", b"").decode()
        if key_id != self.key_id:
            raise ValueError(f"payload sealed under key id {key_id!r}, this codec holds {self.key_id!r}")
        nonce, sealed = payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:]
        return Payload.FromString(self._aead.decrypt(nonce, sealed, key_id.encode()))
