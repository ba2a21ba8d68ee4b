"""AES-256-GCM sealing of history batches and run state under the namespace's data key (rule 6).

The associated data binds each ciphertext to its namespace, run and position, so a blob copied to
another row (or another tenant's row) fails to open instead of decrypting into the wrong place.
"""

from __future__ import annotations

import os
import uuid

from tenants import datakeys

FORMAT = 1
"""The first byte of every ciphertext; then the data key version (4 bytes), the nonce and the sealed text."""


def seal(namespace_id: uuid.UUID, plaintext: bytes, aad: bytes, *, version: int | None = None) -> bytes:
    """Seal under the namespace's newest data key version (or the one given)."""
    version, aead = datakeys.cipher(namespace_id, version)
    nonce = os.urandom(12)
    return bytes([FORMAT]) + version.to_bytes(4, "big") + nonce + aead.encrypt(nonce, plaintext, aad)


def unseal(namespace_id: uuid.UUID, blob: bytes, aad: bytes) -> bytes:
    blob = bytes(blob)
    if not blob or blob[0] != FORMAT:
        raise ValueError("unknown ciphertext format")
    version = int.from_bytes(blob[1:5], "big")
    _, aead = datakeys.cipher(namespace_id, version)
    return aead.decrypt(blob[5:17], blob[17:], aad)


def history_aad(namespace_id: uuid.UUID, run_id: str, first_event_id: int) -> bytes:
    return f"perdura/history/{namespace_id}/{run_id}/{first_event_id}".encode()


def transfer_aad(namespace_id: uuid.UUID, run_id: str, event_id: int) -> bytes:
    return f"perdura/transfer/{namespace_id}/{run_id}/{event_id}".encode()


def state_aad(namespace_id: uuid.UUID, run_id: str) -> bytes:
    return f"perdura/state/{namespace_id}/{run_id}".encode()


def schedule_aad(namespace_id: uuid.UUID, schedule_id: str, part: str) -> bytes:
    return f"perdura/schedule/{namespace_id}/{schedule_id}/{part}".encode()


def batch_aad(namespace_id: uuid.UUID, job_id: str) -> bytes:
    return f"perdura/batch/{namespace_id}/{job_id}".encode()
