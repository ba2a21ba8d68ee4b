"""Control-plane reads: namespaces (cached briefly per process because every RPC resolves one),
organisations and API keys."""

from __future__ import annotations

import threading
import time

from tenants import api_keys
from tenants.models import ApiKey, Namespace, Organization

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


def namespace_forget(name: str) -> None:
    """Drop `name` from this process's cache after a change (other processes see it within seconds)."""
    with _lock:
        _cache.pop(name, None)


def namespace_list(*, names: frozenset[str] | None = None) -> list[Namespace]:
    """All namespaces by name, or only those in `names`."""
    query = Namespace.objects.order_by("name")
    if names is not None:
        query = query.filter(name__in=names)
    return list(query)


def organization_by_slug(slug: str) -> Organization | None:
    return Organization.objects.filter(slug=slug).first()


def apikey_find(value: str) -> ApiKey | None:
    """The key named by `value`: the whole key (verified) or its prefix (`pdk_<prefix>` or bare)."""
    prefix = api_keys.parse_prefix(value)
    if prefix is None:
        return None
    key = ApiKey.objects.select_related("organization").filter(prefix=prefix).first()
    parsed = api_keys.parse(value)
    if key is not None and parsed is not None and not api_keys.verify(parsed.plaintext, key.secret_hash):
        return None
    return key


def apikey_list(*, organization: Organization) -> list[ApiKey]:
    """An organisation's keys, newest first, with their namespaces."""
    return list(
        ApiKey.objects.filter(organization=organization)
        .prefetch_related("namespaces")
        .order_by("-created_at")
    )
