"""Each namespace's custom search attributes, cached in-process (a miss re-reads, so adds show at once)."""

from __future__ import annotations

import threading
import time
import uuid

from visibility.models import CustomSearchAttribute
from visibility.search_attributes import SYSTEM, SaType

_TTL_SECONDS = 5.0
_MIN_RELOAD_SECONDS = 0.2
_lock = threading.Lock()
_cache: dict[str, tuple[float, dict[str, SaType]]] = {}


def _load(namespace_id: str) -> dict[str, SaType]:
    rows = CustomSearchAttribute.objects.filter(namespace_id=namespace_id).values_list("name", "type")
    types = {name: SaType(t) for name, t in rows}
    with _lock:
        _cache[namespace_id] = (time.monotonic(), types)
    return types


def custom_types(namespace_id: uuid.UUID | str, *, names: object = ()) -> dict[str, SaType]:
    """The namespace's custom attributes by name.

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
    loaded_at, types = entry
    if now - loaded_at > _MIN_RELOAD_SECONDS and any(n not in types and n not in SYSTEM for n in names):  # type: ignore[attr-defined]
        return _load(key)
    return types


def forget(namespace_id: uuid.UUID | str) -> None:
    """Drop the cached map (after this process changed it)."""
    with _lock:
        _cache.pop(str(namespace_id), None)
