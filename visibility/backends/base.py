"""The visibility backend contract: list a page, count (with GROUP BY), scan; and the configured backend.

A deployment picks its backend with PERDURA_VISIBILITY (`sql`, the default, or `opensearch`); it is
loaded once per process. The RPC layer reaches it only through `visibility.selectors`. Every backend
takes a filter already parsed and resolved against the namespace (visibility.query), and must select
exactly the runs the in-memory evaluator (visibility.query.memory) selects: the conformance suite
(tests/integration/test_visibility_backends.py) holds every backend to that.
"""

from __future__ import annotations

import abc
import threading
import uuid
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from visibility.backends.sql import Record
    from visibility.query import ast

BACKENDS = ("sql", "opensearch")


class BackendUnavailable(Exception):
    """The backend cannot answer now (OpenSearch unreachable or overloaded): UNAVAILABLE, retry later."""


class VisibilityBackend(abc.ABC):
    """Where list, count and scan read runs from."""

    name: str

    @abc.abstractmethod
    def list_page(
        self, namespace_id: uuid.UUID, query: ast.Query, *, page_size: int, page_token: bytes
    ) -> tuple[list[Record], bytes]:
        """A page of the namespace's runs matching `query`, and the next page's token (empty after the last).

        Without ORDER BY the order is Temporal's: open runs first, then by close time, start time and
        run row id, newest first; the token is the last row's sort key, so a run is never listed twice
        and never skipped while other runs start and close. With ORDER BY (missing values last, ties
        by row id newest first) the token is an offset.

        Raises:
            ValueError: a page token this backend did not make.
        """

    @abc.abstractmethod
    def count(self, namespace_id: uuid.UUID, query: ast.Query) -> tuple[int, list[tuple[int, int]]]:
        """How many runs match; with GROUP BY ExecutionStatus also (status, count) per group, largest first."""

    def scan_page(
        self, namespace_id: uuid.UUID, query: ast.Query, *, page_size: int, page_token: bytes
    ) -> tuple[list[Record], bytes]:
        """A page of a scan: every matching run exactly once over all pages, in no promised order.

        Raises:
            ValueError: a page token this backend did not make.
        """
        return self.list_page(namespace_id, query, page_size=page_size, page_token=page_token)


_lock = threading.Lock()
_loaded: VisibilityBackend | None = None


def configured() -> str:
    """The configured backend's name (PERDURA_VISIBILITY)."""
    name = getattr(settings, "PERDURA_VISIBILITY", "sql") or "sql"
    if name not in BACKENDS:
        raise ImproperlyConfigured(f"PERDURA_VISIBILITY must be one of {', '.join(BACKENDS)}, not {name!r}")
    return name


def backend() -> VisibilityBackend:
    """The process's visibility backend, loaded on first use."""
    global _loaded
    if _loaded is None:
        with _lock:
            if _loaded is None:
                if configured() == "opensearch":
                    from visibility.backends import opensearch

                    _loaded = opensearch.OpenSearchBackend.from_settings()
                else:
                    from visibility.backends import sql

                    _loaded = sql.SqlBackend()
    return _loaded
