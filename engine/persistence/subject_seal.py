"""Payloads of a run with a data subject, sealed under the subject's key inside the namespace-sealed blobs.

The rules (README, Erasure):
- A run names its subject in `PerduraDataSubject` (engine/history/subjects.py). Every payload of its
  history batches and of its visibility memo is replaced by a sealed payload before the blob is sealed
  under the namespace key: metadata `encoding` `binary/x-perdura-sealed`, `perdura-subject-key` the
  subject key's id; data the nonce and the AES-GCM sealed serialized Payload. Search attributes are not
  payloads here: they stay plaintext, indexed (DESIGN.md rule 6).
- A blob holding sealed payloads starts with `MARK` (never the first byte of a serialized History or
  Memo), so the readers of runs without a subject parse their blobs as before: no walk, no key lookup.
- Reading opens each sealed payload; one whose key was destroyed answers the marker payload, `encoding`
  `binary/x-perdura-erased`, so the history keeps its shape. Exports keep the sealed payloads sealed
  (`keep_sealed`): a file made before an erasure is erased with the key.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from google.protobuf.message import Message
from temporalio.api.common.v1 import Memo, Payload, SearchAttributes
from temporalio.api.history.v1 import History, HistoryEvent

from tenants import subject_keys

SEALED = b"binary/x-perdura-sealed"
ERASED = b"binary/x-perdura-erased"
KEY_METADATA = "perdura-subject-key"
MARK = b"\xffperdura/subject-sealed/1\n"
"""Leads a blob whose payloads are sealed per subject (0xff is no valid first byte of a History or Memo)."""

_PAYLOAD = Payload.DESCRIPTOR.full_name
_SKIP = frozenset({SearchAttributes.DESCRIPTOR.full_name})


def _aad(namespace_id: uuid.UUID, key_id: str) -> bytes:
    return f"perdura/subject-payload/{namespace_id}/{key_id}".encode()


def each_payload(message: Message, apply: Callable[[Payload], None]) -> None:
    """Call `apply` on every Payload set in `message`, at any depth, except inside search attributes."""
    for field, value in message.ListFields():
        kind = field.message_type
        if kind is None or kind.full_name in _SKIP:
            continue
        if kind.GetOptions().map_entry:
            value_kind = kind.fields_by_name["value"].message_type
            if value_kind is None or value_kind.full_name in _SKIP:
                continue
            items = list(value.values())
            is_payload = value_kind.full_name == _PAYLOAD
        elif field.is_repeated:
            items = list(value)
            is_payload = kind.full_name == _PAYLOAD
        else:
            items = [value]
            is_payload = kind.full_name == _PAYLOAD
        for item in items:
            if is_payload:
                apply(item)
            else:
                each_payload(item, apply)


class Keys:
    """The subject keys one read opens, each looked up once (never kept past the read: see tenants/subject_keys.py)."""

    def __init__(self, namespace_id: uuid.UUID) -> None:
        self.namespace_id = namespace_id
        self._found: dict[str, AESGCM | None] = {}

    def get(self, key_id: str) -> AESGCM | None:
        if key_id not in self._found:
            try:
                parsed = uuid.UUID(key_id)
            except ValueError:
                self._found[key_id] = None
            else:
                self._found[key_id] = subject_keys.subject_cipher(
                    namespace_id=self.namespace_id, key_id=parsed
                )
        return self._found[key_id]


def _sealer(namespace_id: uuid.UUID, subject: str) -> Callable[[Payload], None]:
    # The key is found (or made) at the first payload: a batch without payloads, such as the termination
    # an erasure makes, makes no new key for an erased subject.
    key: list[tuple[str, AESGCM, bytes]] = []

    def seal(payload: Payload) -> None:
        if payload.metadata.get("encoding") == ERASED:
            return  # already gone (read back from an erased run's state): nothing to seal, no key to make
        if not key:
            key_id, aead = subject_keys.subject_key_for(namespace_id=namespace_id, subject=subject)
            key.append((key_id.hex, aead, _aad(namespace_id, key_id.hex)))
        name, aead, aad = key[0]
        nonce = os.urandom(12)
        sealed = nonce + aead.encrypt(nonce, payload.SerializeToString(), aad)
        payload.Clear()
        payload.metadata["encoding"] = SEALED
        payload.metadata[KEY_METADATA] = name.encode()
        payload.data = sealed

    return seal


def erased_marker(key_id: str) -> Payload:
    """What a reader gets for a payload whose subject key was destroyed."""
    return Payload(metadata={"encoding": ERASED, KEY_METADATA: key_id.encode()})


def _opener(keys: Keys, *, keep_sealed: bool) -> Callable[[Payload], None]:
    def open_(payload: Payload) -> None:
        if payload.metadata.get("encoding") != SEALED:
            return
        key_id = payload.metadata.get(KEY_METADATA, b"").decode("ascii", "replace")
        aead = keys.get(key_id)
        if aead is None:
            payload.CopyFrom(erased_marker(key_id))
            return
        if keep_sealed:
            return
        data = bytes(payload.data)
        try:
            plain = aead.decrypt(data[:12], data[12:], _aad(keys.namespace_id, key_id))
        except InvalidTag:
            # Copied from another namespace or tampered with: as unreadable as an erased one.
            payload.CopyFrom(erased_marker(key_id))
            return
        payload.CopyFrom(Payload.FromString(plain))

    return open_


def seal_events(namespace_id: uuid.UUID, subject: str, events: list[HistoryEvent]) -> bytes:
    """A history batch's plaintext with every payload sealed under the subject's key (the events given
    are not changed: the write path still answers with them)."""
    history = History(events=events)
    each_payload(history, _sealer(namespace_id, subject))
    return MARK + history.SerializeToString()


def sealer(namespace_id: uuid.UUID, subject: str) -> Callable[[Payload], None]:
    """A function sealing one payload in place under the subject's live key (found at its first use)."""
    return _sealer(namespace_id, subject)


def opener(keys: Keys, *, keep_sealed: bool = False) -> Callable[[Payload], None]:
    """A function opening one sealed payload in place (an erased marker when its key was destroyed)."""
    return _opener(keys, keep_sealed=keep_sealed)


def seal_message(message: Message, seal: Callable[[Payload], None]) -> bytes:
    """`message` serialized with its payloads sealed (changed in place), behind MARK."""
    each_payload(message, seal)
    return MARK + message.SerializeToString()


def open_message(kind: type[Message], data: bytes, open_: Callable[[Payload], None]) -> bytes:
    """A serialized `kind` as stored: behind MARK, its payloads opened; anything else as it is."""
    if not data.startswith(MARK):
        return data
    message = kind.FromString(data[len(MARK) :])
    each_payload(message, open_)
    return message.SerializeToString()


def open_history(plain: bytes, keys: Keys, *, keep_sealed: bool = False) -> History:
    """A history batch's plaintext as a History, its sealed payloads opened (or erased markers)."""
    if not plain.startswith(MARK):
        return History.FromString(plain)
    history = History.FromString(plain[len(MARK) :])
    each_payload(history, _opener(keys, keep_sealed=keep_sealed))
    return history


def seal_memo(namespace_id: uuid.UUID, subject: str, memo: bytes) -> bytes:
    """A serialized Memo with its payloads sealed under the subject's key."""
    message = Memo.FromString(memo)
    each_payload(message, _sealer(namespace_id, subject))
    return MARK + message.SerializeToString()


def open_memo(namespace_id: uuid.UUID, plain: bytes) -> bytes:
    """A serialized Memo as stored, its sealed payloads opened (or erased markers)."""
    if not plain.startswith(MARK):
        return plain
    message = Memo.FromString(plain[len(MARK) :])
    each_payload(message, _opener(Keys(namespace_id), keep_sealed=False))
    return message.SerializeToString()
