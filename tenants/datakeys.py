"""Namespace data keys: create, wrap under the master key, open (cached) for encryption, and rotate.

Two rotations, both online:
- A namespace's data key (`datakey_create`, `perdura namespace rotate-key`): a new version seals new
  writes; every older version stays and opens what it sealed. Processes look for a newer version every
  PERDURA_DATAKEY_REFRESH_SECONDS, so within that time all of them seal with it; engine/persistence/
  reencrypt.py then moves old ciphertexts to it.
- The master key (`rewrap_all`, `perdura masterkey rotate`): each data key row names the master key that
  wraps it (`master_key_id`), so while PERDURA_MASTER_KEY is the new key and PERDURA_MASTER_KEY_PREVIOUS
  the old one, every row opens, re-wrapped or not. The unwrapped data keys are unchanged by this, so no
  ciphertext is touched.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.db import transaction
from perdura import clock, env, masterkey, metrics

from tenants import audit
from tenants.models import DataKey, Namespace

_cache: dict[tuple[uuid.UUID, int], AESGCM] = {}
_current: dict[uuid.UUID, tuple[int, float]] = {}
"""The newest version each namespace seals with, and when it was read (time.monotonic)."""
_lock = threading.Lock()
_CACHE_HITS = metrics.data_key_cache.labels("hit")
_CACHE_MISSES = metrics.data_key_cache.labels("miss")


class MasterKeyMissing(RuntimeError):
    """A data key is wrapped by a master key this process was not given."""


def _wrap_aad(namespace_id: uuid.UUID, version: int) -> bytes:
    return f"perdura/datakey/{namespace_id}/{version}".encode()


def _wrap(namespace_id: uuid.UUID, version: int, raw: bytes) -> tuple[bytes, str]:
    key = masterkey.master_key()
    nonce = os.urandom(12)
    return nonce + AESGCM(key).encrypt(nonce, raw, _wrap_aad(namespace_id, version)), masterkey.key_id(key)


def datakey_create(*, namespace: Namespace) -> DataKey:
    """Create the namespace's next data key version, wrapped by the master key; it seals new writes."""
    last = (
        DataKey.objects.filter(namespace=namespace)
        .order_by("-version")
        .values_list("version", flat=True)
        .first()
    )
    version = (last or 0) + 1
    wrapped, key_id = _wrap(namespace.id, version, AESGCM.generate_key(bit_length=256))
    key = DataKey.objects.create(
        namespace=namespace,
        version=version,
        wrapped_key=wrapped,
        master_key_id=key_id,
        created_at=clock.now(),
    )
    with _lock:
        _current.pop(namespace.id, None)
    return key


def datakey_rotate(*, namespace: Namespace) -> DataKey:
    """Start the namespace's next data key version for new writes, and record `namespace.rotate_key`
    (the bound audit context names who rotated: the operator's CLI, a namespace admin in the console).
    Old ciphertexts stay readable under their versions until engine/persistence/reencrypt.py moves them."""
    with transaction.atomic():
        key = datakey_create(namespace=namespace)
        audit.record_change(
            action="namespace.rotate_key",
            target=f"namespace/{namespace.name}",
            namespace=namespace,
            details={"data_key_version": key.version},
        )
    return key


def current_key(namespace_id: uuid.UUID) -> DataKey | None:
    """The newest data key row of the namespace (its version seals new writes), read from the database."""
    return DataKey.objects.filter(namespace_id=namespace_id).order_by("-version").first()


def _unwrap_raw(namespace_id: uuid.UUID, version: int, wrapped: bytes, master_key_id: str) -> bytes:
    wrapped = bytes(wrapped)
    known = masterkey.known_keys()
    # Rows from before master key ids were kept name none: try each key this process has.
    candidates = (
        [known[master_key_id]] if master_key_id in known else [] if master_key_id else list(known.values())
    )
    for key in candidates:
        try:
            return AESGCM(key).decrypt(wrapped[:12], wrapped[12:], _wrap_aad(namespace_id, version))
        except InvalidTag:
            continue
    raise MasterKeyMissing(
        f"data key version {version} of namespace {namespace_id} is wrapped by master key "
        f"{master_key_id or '(unnamed)'}, which is neither PERDURA_MASTER_KEY ({masterkey.key_id(masterkey.master_key())}) "
        "nor PERDURA_MASTER_KEY_PREVIOUS: set the old key as PERDURA_MASTER_KEY_PREVIOUS until "
        "`perdura masterkey rotate` has re-wrapped every data key"
    )


def cipher(namespace_id: uuid.UUID, version: int | None = None) -> tuple[int, AESGCM]:
    """The AES-GCM cipher of a namespace's data key: the given version, or the newest one."""
    if version is None:
        known = _current.get(namespace_id)
        if known is not None and time.monotonic() - known[1] < env.datakey_refresh_seconds():
            version = known[0]
    if version is not None and (namespace_id, version) in _cache:
        _CACHE_HITS.inc()
        return version, _cache[(namespace_id, version)]
    _CACHE_MISSES.inc()
    query = DataKey.objects.filter(namespace_id=namespace_id)
    row = query.filter(version=version).first() if version is not None else query.order_by("-version").first()
    if row is None:
        which = f"version {version}" if version is not None else "data key"
        raise LookupError(f"namespace {namespace_id} has no {which}")
    aead = _cache.get((namespace_id, row.version))
    if aead is None:
        aead = AESGCM(_unwrap_raw(namespace_id, row.version, row.wrapped_key, row.master_key_id))
    with _lock:
        _cache[(namespace_id, row.version)] = aead
        if version is None:
            _current[namespace_id] = (row.version, time.monotonic())
    return row.version, aead


def current_version(namespace_id: uuid.UUID) -> int:
    """The version new writes of the namespace are sealed with, read from the database."""
    version = (
        DataKey.objects.filter(namespace_id=namespace_id)
        .order_by("-version")
        .values_list("version", flat=True)
        .first()
    )
    if version is None:
        raise LookupError(f"namespace {namespace_id} has no data key")
    return version


@dataclass(frozen=True)
class Rewrap:
    rewrapped: int
    already_current: int
    master_key_id: str


def rewrap_all(*, batch: int = 200, progress: Callable[[int, int], object] | None = None) -> Rewrap:
    """Re-wrap every data key not wrapped by the current master key. Idempotent and resumable: a row is
    replaced only if it is still the one read (another rotation running at once loses nothing)."""
    current = masterkey.key_id(masterkey.master_key())
    total = DataKey.objects.count()
    rewrapped = 0
    after = 0
    while True:
        rows = list(DataKey.objects.filter(pk__gt=after).order_by("pk")[:batch])
        if not rows:
            break
        for row in rows:
            after = row.pk
            if row.master_key_id == current:
                continue
            raw = _unwrap_raw(row.namespace_id, row.version, row.wrapped_key, row.master_key_id)
            wrapped, key_id = _wrap(row.namespace_id, row.version, raw)
            with transaction.atomic():
                rewrapped += DataKey.objects.filter(
                    pk=row.pk, master_key_id=row.master_key_id, wrapped_key=row.wrapped_key
                ).update(wrapped_key=wrapped, master_key_id=key_id)
        if progress is not None:
            progress(after, total)
    return Rewrap(rewrapped=rewrapped, already_current=total - rewrapped, master_key_id=current)


def wrapped_by_other_keys() -> int:
    """How many data keys the current master key does not wrap yet (0: PREVIOUS may be dropped)."""
    return DataKey.objects.exclude(master_key_id=masterkey.key_id(masterkey.master_key())).count()
