"""Each namespace's custom search attributes and their slots, cached in-process (a miss re-reads, so adds show at once)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from visibility.models import CustomSearchAttribute
from visibility.search_attributes import SYSTEM, SaType

_TTL_SECONDS = 5.0
_MIN_RELOAD_SECONDS = 0.2
_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Registered:
    """A namespace's custom attributes as read at one moment: types and slots agree with each other."""

    types: dict[str, SaType] = field(default_factory=dict)
    """Type of each custom attribute, by name."""
    slots: dict[str, str] = field(default_factory=dict)
    """Slot column of each attribute that has one (visibility.slots), by name."""


_cache: dict[str, tuple[float, Registered]] = {}


def _load(namespace_id: str) -> Registered:
    rows = list(
        CustomSearchAttribute.objects.filter(namespace_id=namespace_id).values_list("name", "type", "slot")
    )
    registered = Registered(
        types={name: SaType(t) for name, t, _ in rows},
        slots={name: slot for name, _, slot in rows if slot is not None},
    )
    with _lock:
        _cache[namespace_id] = (time.monotonic(), registered)
    return registered


def custom_attributes(namespace_id: uuid.UUID | str, *, names: Iterable[str] = ()) -> Registered:
    """The namespace's custom attributes: types and slots by name.

    A process may see a removal up to 5 s late (another process's change; its own are seen at once).
    Writers of slot columns re-check the slot in the database as they write (see
    visibility.backends.sql.records.record_upsert_txn), so a stale entry never puts a value in another
    attribute's slot.

    Args:
        namespace_id: the namespace.
        names: names the caller is about to look up; one the cached map lacks forces a re-read
            (at most every 0.2 s), so an attribute added by another process is seen at once.
    """
    key = str(namespace_id)
    with _lock:
        entry = _cache.get(key)
    now = time.monotonic()
    if entry is None or now - entry[0] > _TTL_SECONDS:
        return _load(key)
    loaded_at, registered = entry
    if now - loaded_at > _MIN_RELOAD_SECONDS and any(
        n not in registered.types and n not in SYSTEM for n in names
    ):
        return _load(key)
    return registered


def custom_types(namespace_id: uuid.UUID | str, *, names: Iterable[str] = ()) -> dict[str, SaType]:
    """The namespace's custom attributes by name (see `custom_attributes`)."""
    return custom_attributes(namespace_id, names=names).types


def forget(namespace_id: uuid.UUID | str) -> None:
    """Drop the cached map (after this process changed it)."""
    with _lock:
        _cache.pop(str(namespace_id), None)
