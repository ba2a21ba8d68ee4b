"""Namespace reads, cached briefly per process because every RPC resolves one."""

from __future__ import annotations

import threading
import time

from tenants.models import Namespace

_TTL_SECONDS = 5.0
_cache: dict[str, tuple[float, Namespace]] = {}
_lock = threading.Lock()


def namespace_by_name(name: str) -> Namespace | None:
    """The namespace called `name`, or None (cached for a few seconds)."""
    hit = _cache.get(name)
    now = time.monotonic()
    if hit is not None and now - hit[0] < _TTL_SECONDS:
        return hit[1]
    namespace = Namespace.objects.filter(name=name).first()
    if namespace is not None:
        with _lock:
            _cache[name] = (now, namespace)
    return namespace


def namespace_list() -> list[Namespace]:
    return list(Namespace.objects.order_by("name"))
