"""The visibility backend contract: the Record value type, list a page, count (with GROUP BY), scan.

Every backend takes a filter already parsed and resolved against the namespace (visibility.query), and
must select exactly the runs the in-memory evaluator (visibility.query.memory) selects: the conformance
suite (tests/integration/test_visibility_backends.py) holds every backend to that. Backends live in a
folder each (sql/, opensearch/) and import only this module of one another; the configured one is
loaded by `visibility.backends.backend()`, and the RPC layer reaches it only through
`visibility.selectors`.
"""

from __future__ import annotations

import abc
import base64
import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from visibility.query import ast


@dataclass(frozen=True, slots=True)
class Record:
    """One run as visibility stores it (times in microseconds since the epoch, duration in nanoseconds)."""

    execution_id: int
    namespace_id: uuid.UUID
    workflow_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    status: int
    start_time: int
    execution_time: int
    close_time: int | None
    execution_duration: int | None
    history_length: int
    history_size_bytes: int
    state_transition_count: int
    parent_workflow_id: str | None
    parent_run_id: str | None
    root_workflow_id: str
    root_run_id: str
    first_run_id: str
    memo: bytes
    """Sealed by the caller."""
    search_attributes: bytes
    custom: dict[str, object]


INTERVAL_FIELDS = ("StartTime", "CloseTime")
"""The times `VisibilityBackend.count_by_interval` counts over."""

MAX_INTERVALS = 500
"""The most intervals one `count_by_interval` read may ask for."""


def check_intervals(field: str, step: int, buckets: int) -> None:
    """Refuse what `count_by_interval` does not count over (every backend checks the same way).

    Raises:
        ValueError: an unknown field, or a step or count out of range.
    """
    if field not in INTERVAL_FIELDS:
        raise ValueError(f"intervals are counted over {', '.join(INTERVAL_FIELDS)}, not {field!r}")
    if step < 1 or not 1 <= buckets <= MAX_INTERVALS:
        raise ValueError(f"intervals need a step of at least 1 and 1 to {MAX_INTERVALS} of them")


class BackendUnavailable(Exception):
    """The backend cannot answer now (OpenSearch unreachable or overloaded): UNAVAILABLE, retry later."""


class VisibilityBackend(abc.ABC):
    """Where list, count and scan read runs from."""

    name: str

    @classmethod
    def from_settings(cls) -> VisibilityBackend:
        """The backend as the settings configure it (what `visibility.backends.backend()` loads)."""
        return cls()

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

    @abc.abstractmethod
    def count_by_interval(
        self, namespace_id: uuid.UUID, query: ast.Query, *, field: str, start: int, step: int, buckets: int
    ) -> list[int]:
        """How many matching runs have the time `field` in each of `buckets` consecutive intervals.

        Interval i is [start + i * step, start + (i + 1) * step), in microseconds since the epoch; a run
        whose `field` is unset (CloseTime of an open run) or outside them counts nowhere. One read, whatever
        the number of intervals (the console's charts of starts and failures).

        Args:
            field: one of `INTERVAL_FIELDS` (StartTime, CloseTime).

        Raises:
            ValueError: another field, or a step or count below 1.
        """

    def scan_page(
        self, namespace_id: uuid.UUID, query: ast.Query, *, page_size: int, page_token: bytes
    ) -> tuple[list[Record], bytes]:
        """A page of a scan: every matching run exactly once over all pages, in no promised order.

        Raises:
            ValueError: a page token this backend did not make.
        """
        return self.list_page(namespace_id, query, page_size=page_size, page_token=page_token)


def encode_page_token(data: dict[str, object]) -> bytes:
    """A page token: the backend's resume state as URL-safe base64 of compact JSON."""
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode())


def decode_page_token(token: bytes) -> dict[str, Any]:
    """The state `encode_page_token` put in a token; its values are the caller's to check.

    Raises:
        ValueError: not a token of this shape.
    """
    try:
        data = json.loads(base64.urlsafe_b64decode(token))
    except ValueError:
        raise ValueError("invalid page token") from None
    if not isinstance(data, dict):
        raise ValueError("invalid page token")
    return data
