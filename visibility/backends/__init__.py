"""Visibility backends: the contract in base.py, one folder per backend, and the configured one.

A deployment picks its backend with PERDURA_VISIBILITY (`sql`, the default, or `opensearch`); it is
imported on first use and loaded once per process, so a deployment on SQL never imports OpenSearch's.
"""

from __future__ import annotations

import threading

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from visibility.backends.base import VisibilityBackend

BACKENDS = {
    "sql": "visibility.backends.sql.backend.SqlBackend",
    "opensearch": "visibility.backends.opensearch.backend.OpenSearchBackend",
}
"""Each backend's name (PERDURA_VISIBILITY) and its class."""

_lock = threading.Lock()
_loaded: VisibilityBackend | None = None


def configured() -> str:
    """The configured backend's name (PERDURA_VISIBILITY).

    Raises:
        ImproperlyConfigured: not one of BACKENDS.
    """
    name = getattr(settings, "PERDURA_VISIBILITY", "sql") or "sql"
    if name not in BACKENDS:
        raise ImproperlyConfigured(f"PERDURA_VISIBILITY must be one of {', '.join(BACKENDS)}, not {name!r}")
    return str(name)


def backend() -> VisibilityBackend:
    """The process's visibility backend, loaded on first use."""
    global _loaded
    if _loaded is None:
        with _lock:
            if _loaded is None:
                backend_class: type[VisibilityBackend] = import_string(BACKENDS[configured()])
                _loaded = backend_class.from_settings()
    return _loaded
