"""Per-subject data keys: made on a subject's first sealed write, opened per read, destroyed by erasure.

The key tree is master key → namespace data key (versioned, tenants/datakeys.py) → subject key. A subject
key is wrapped by the namespace data key version current when it was made; erasure empties the wrapped
key, so no key higher in the tree can recover it, and every payload it sealed is gone with it.

Opened subject keys are never cached across calls: an erasure in any process takes effect on the next
read everywhere, and runs without a subject never come here (they pay nothing).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.db import transaction
from perdura import clock

from tenants import datakeys
from tenants.models import Namespace, SubjectKey


def _wrap_aad(namespace_id: uuid.UUID, key_id: uuid.UUID) -> bytes:
    return f"perdura/subjectkey/{namespace_id}/{key_id}".encode()


def subject_key_for(*, namespace_id: uuid.UUID, subject: str) -> tuple[uuid.UUID, AESGCM]:
    """The live key of a subject (made now if the subject has none): its id and its cipher.

    Safe to call from concurrent writers inside their transactions: the insert skips a conflict with a
    key another writer made first, and the live key is then read back.
    """
    row = SubjectKey.objects.filter(
        namespace_id=namespace_id, subject=subject, erased_at__isnull=True
    ).first()
    if row is None:
        version, namespace_aead = datakeys.cipher(namespace_id)
        key_id = uuid.uuid4()
        nonce = os.urandom(12)
        raw = AESGCM.generate_key(bit_length=256)
        wrapped = nonce + namespace_aead.encrypt(nonce, raw, _wrap_aad(namespace_id, key_id))
        SubjectKey.objects.bulk_create(
            [
                SubjectKey(
                    id=key_id,
                    namespace_id=namespace_id,
                    subject=subject,
                    namespace_key_version=version,
                    wrapped_key=wrapped,
                    created_at=clock.now(),
                )
            ],
            ignore_conflicts=True,
        )
        row = SubjectKey.objects.get(namespace_id=namespace_id, subject=subject, erased_at__isnull=True)
    cipher = subject_cipher(namespace_id=namespace_id, key_id=row.id, row=row)
    assert cipher is not None  # a live row always opens
    return row.id, cipher


def subject_cipher(
    *, namespace_id: uuid.UUID, key_id: uuid.UUID, row: SubjectKey | None = None
) -> AESGCM | None:
    """The cipher of subject key `key_id`, or None when it was erased (or never was this namespace's)."""
    if row is None:
        row = SubjectKey.objects.filter(id=key_id, namespace_id=namespace_id).first()
    if row is None or row.erased_at is not None or not row.wrapped_key:
        return None
    wrapped = bytes(row.wrapped_key)
    _, namespace_aead = datakeys.cipher(namespace_id, row.namespace_key_version)
    return AESGCM(namespace_aead.decrypt(wrapped[:12], wrapped[12:], _wrap_aad(namespace_id, row.id)))


@dataclass(frozen=True, slots=True)
class Destroyed:
    """What an erasure destroyed."""

    key_ids: list[str]
    """The subject's keys emptied now (none when it had no live key: erasing twice is harmless)."""


def subject_keys_destroy(*, namespace: Namespace, subject: str) -> Destroyed:
    """Destroy every key of `subject` in `namespace`: the wrapped key is overwritten with nothing and the
    row marked erased, in one transaction. Idempotent."""
    with transaction.atomic():
        rows = list(
            SubjectKey.objects.select_for_update().filter(
                namespace=namespace, subject=subject, erased_at__isnull=True
            )
        )
        for row in rows:
            SubjectKey.objects.filter(pk=row.pk).update(wrapped_key=b"", erased_at=clock.now())
    return Destroyed(key_ids=[str(r.id) for r in rows])
