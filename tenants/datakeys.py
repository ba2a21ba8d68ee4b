"""Namespace data keys: create, wrap under the master key, and open (cached) for encryption."""

from __future__ import annotations

import os
import threading
import uuid

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from perdura import clock, masterkey

from tenants.models import DataKey, Namespace

_cache: dict[tuple[uuid.UUID, int], AESGCM] = {}
_current: dict[uuid.UUID, int] = {}
_lock = threading.Lock()


def _wrap_aad(namespace_id: uuid.UUID, version: int) -> bytes:
    return f"perdura/datakey/{namespace_id}/{version}".encode()


def datakey_create(*, namespace: Namespace) -> DataKey:
    """Create the namespace's next data key version, wrapped by the master key."""
    last = (
        DataKey.objects.filter(namespace=namespace)
        .order_by("-version")
        .values_list("version", flat=True)
        .first()
    )
    version = (last or 0) + 1
    nonce = os.urandom(12)
    raw = AESGCM.generate_key(bit_length=256)
    wrapped = nonce + AESGCM(masterkey.master_key()).encrypt(nonce, raw, _wrap_aad(namespace.id, version))
    key = DataKey.objects.create(
        namespace=namespace, version=version, wrapped_key=wrapped, created_at=clock.now()
    )
    with _lock:
        _current.pop(namespace.id, None)
    return key


def _unwrap(namespace_id: uuid.UUID, version: int, wrapped: bytes) -> AESGCM:
    wrapped = bytes(wrapped)
    raw = AESGCM(masterkey.master_key()).decrypt(wrapped[:12], wrapped[12:], _wrap_aad(namespace_id, version))
    return AESGCM(raw)


def cipher(namespace_id: uuid.UUID, version: int | None = None) -> tuple[int, AESGCM]:
    """The AES-GCM cipher of a namespace's data key: the given version, or the newest one."""
    if version is None:
        version = _current.get(namespace_id)
    if version is not None and (namespace_id, version) in _cache:
        return version, _cache[(namespace_id, version)]
    query = DataKey.objects.filter(namespace_id=namespace_id)
    row = query.get(version=version) if version is not None else query.order_by("-version").first()
    if row is None:
        raise LookupError(f"namespace {namespace_id} has no data key")
    aead = _unwrap(namespace_id, row.version, row.wrapped_key)
    with _lock:
        _cache[(namespace_id, row.version)] = aead
        if version is None:
            _current[namespace_id] = row.version
    return row.version, aead
