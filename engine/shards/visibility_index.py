"""Indexing runs in OpenSearch: VISIBILITY transfer rows in bulk, with backoff, and the full rebuild.

A VISIBILITY row is created in the transaction that rewrites a run's visibility record (rule 3). The
shard's processor reads the record as it is now together with the run's `db_version`, sends it with
that version as OpenSearch's external version, and deletes the row, under the shard's fence, only
once OpenSearch has acknowledged it (or holds a newer version). Rows of one run coalesce: the current
record covers every change before it. While OpenSearch is down the rows stay, and the processor
retries with exponential backoff; nothing is lost, and the index catches up when it is back.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from perdura import clock

from engine.history.mutation import TransferKind
from engine.models import Transfer
from engine.persistence import leases
from engine.persistence import visibility as visibility_store
from engine.shards import parking
from engine.shards.budget import Budget
from visibility import registry
from visibility.backends import backend
from visibility.backends.base import Record
from visibility.backends.sql import records as sql_records
from visibility.search_attributes import PREDEFINED, SaType

log = logging.getLogger(__name__)
BATCH = 500
MIN_BACKOFF = 0.5
MAX_BACKOFF = 30.0


class _Backoff:
    """When the next attempt may go out after failures (per process: one OpenSearch for all shards)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.delay = 0.0
        self.not_before = 0.0

    def ready(self) -> bool:
        with self._lock:
            return time.monotonic() >= self.not_before

    def seconds_left(self) -> float:
        """How long until the next attempt may go out (0 when it may now)."""
        with self._lock:
            return max(self.not_before - time.monotonic(), 0.0)

    def failed(self) -> float:
        with self._lock:
            self.delay = min(max(self.delay * 2, MIN_BACKOFF), MAX_BACKOFF)
            self.not_before = time.monotonic() + self.delay
            return self.delay

    def succeeded(self) -> None:
        with self._lock:
            self.delay = 0.0
            self.not_before = 0.0


backoff = _Backoff()


def _types(namespace_id: uuid.UUID, cache: dict[uuid.UUID, dict[str, SaType]]) -> dict[str, SaType]:
    if namespace_id not in cache:
        cache[namespace_id] = {**PREDEFINED, **registry.custom_types(namespace_id)}
    return cache[namespace_id]


def _read(where: str, params: list[Any], limit: int | None = None) -> list[tuple[Record, int]]:
    """Records with their run's db_version, read in one statement (so the two agree)."""
    columns = ", ".join(f"v.{c}" for c in sql_records.SELECT_COLUMNS)
    query = (
        f"SELECT {columns}, e.db_version FROM {sql_records.TABLE} v JOIN engine_execution e ON e.id = v.execution_id "
        f"WHERE {where} ORDER BY v.execution_id"
    )
    if limit is not None:
        query += f" LIMIT {int(limit)}"
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        rows = cursor.fetchall()
    return [(sql_records.record_from_row(r[:-1]), int(r[-1])) for r in rows]


def _document(record: Record, cache: dict[uuid.UUID, dict[str, SaType]]) -> dict[str, Any]:
    from visibility.backends.opensearch.documents import document

    return document(record, _types(record.namespace_id, cache))


def _items(
    records: list[tuple[Record, int]], cache: dict[uuid.UUID, dict[str, SaType]]
) -> list[tuple[str, int, dict[str, Any]]]:
    return [(str(r.execution_id), version, _document(r, cache)) for r, version in records]


def _drop(shard: int, range_id: int, ids: list[int]) -> None:
    if not ids:
        return
    with transaction.atomic():
        leases.check(shard, range_id)
        Transfer.objects.filter(pk__in=ids).delete()


def _due(shard: int, now: datetime) -> list[tuple[int, int]]:
    """(row id, run) of the due visibility rows: past their retry time, then fresh in creation order."""
    live = Transfer.objects.filter(shard=shard, kind=TransferKind.VISIBILITY, parked_at__isnull=True)
    retried = live.filter(retry_at__lte=now).order_by("retry_at", "id").values_list("id", "execution_id")
    fresh = live.filter(retry_at__isnull=True).order_by("id").values_list("id", "execution_id")
    return list(retried[:BATCH]) + list(fresh[:BATCH])


class _Batch:
    """The rows of one pass, by run: which are done (to delete) and which failed (charged to the row)."""

    def __init__(self, shard: int, range_id: int, rows: list[tuple[int, int]]) -> None:
        self.shard, self.range_id = shard, range_id
        self.by_run: dict[int, list[int]] = {}
        for row_id, execution_id in rows:
            self.by_run.setdefault(execution_id, []).append(row_id)
        self.done: list[int] = []

    def failed(self, execution_id: int, error: BaseException) -> None:
        """This run's rows failed for a reason of their own (not an outage): each is charged an attempt."""
        for row_id in self.by_run.pop(execution_id, []):
            parking.row_failed(
                queue=parking.VISIBILITY,
                pk=row_id,
                shard=self.shard,
                range_id=self.range_id,
                error=error,
                label="VISIBILITY",
            )


def _records(batch: _Batch) -> list[tuple[Record, int]]:
    """The batch's records; when reading them together fails, each run alone, so that one record that
    cannot be read is charged to its rows and the others go on."""
    runs = sorted(batch.by_run)
    try:
        return _read(f"v.execution_id IN ({', '.join(['%s'] * len(runs))})", list(runs))
    except Exception as e:  # noqa: BLE001
        if parking.is_outage(e):
            raise parking.Outage(str(e)) from e
    records: list[tuple[Record, int]] = []
    for execution_id in runs:
        try:
            records += _read("v.execution_id = %s", [execution_id])
        except Exception as e:  # noqa: BLE001 - the run's rows pay for it
            if parking.is_outage(e):
                raise parking.Outage(str(e)) from e
            batch.failed(execution_id, e)
    return records


def process(shard: int, range_id: int, *, budget: Budget | None = None) -> int:
    """Send the shard's due visibility rows to OpenSearch; returns how many rows were done.

    Two kinds of failure, kept apart. OpenSearch failing as a whole (the request fails, or it defers
    documents: 429, 5xx) is an outage: the rows wait, with the process-wide backoff, and are never
    charged for it however long it lasts. A run whose record cannot be read or turned into a document,
    or whose document OpenSearch refuses (4xx), fails on its own: its rows are charged an attempt and
    back off, then are parked (engine/shards/parking.py), and the other runs are indexed.

    Raises:
        leases.LeaseLost: another worker took the shard (the rows stay for it).
    """
    budget = budget or Budget()
    if not visibility_store.indexed_async():
        # The deployment went back to SQL: the rows have nothing to do (reindex when switching back).
        pending = Transfer.objects.filter(shard=shard, kind=TransferKind.VISIBILITY)
        ids = list(pending.values_list("id", flat=True)[:BATCH])
        _drop(shard, range_id, ids)
        return len(ids)
    if not backoff.ready():
        return 0
    index = backend()
    handled = 0
    cache: dict[uuid.UUID, dict[str, SaType]] = {}
    tried: set[int] = set()
    while not budget.spent():
        rows = [(row_id, run) for row_id, run in _due(shard, clock.now()) if row_id not in tried]
        if not rows:
            return handled
        tried.update(row_id for row_id, _ in rows)
        batch = _Batch(shard, range_id, rows)
        # Read after taking the rows: each record is at least as new as every row it answers for.
        records = _records(batch)
        read = {r.execution_id for r, _ in records}
        # A run without a record (deleted) has nothing to index: its rows are done.
        for execution_id in [e for e in batch.by_run if e not in read]:
            batch.done += batch.by_run.pop(execution_id)
        items: list[tuple[str, int, dict[str, Any]]] = []
        sent: list[Record] = []
        for record, version in records:
            try:
                items.append((str(record.execution_id), version, _document(record, cache)))
                sent.append(record)
            except Exception as e:  # noqa: BLE001 - this run's rows pay for it
                batch.failed(record.execution_id, e)
        retry = False
        try:
            index.ensure_index()  # type: ignore[attr-defined]  # only OpenSearch indexes by transfer row
            acks = index.bulk_index(items) if items else []  # type: ignore[attr-defined]  # as ensure_index
        except Exception as e:  # noqa: BLE001 - the request failed: an outage, no row's fault
            delay = backoff.failed()
            log.warning(
                "OpenSearch indexing failed (%s); %d runs wait, retrying in %.1fs", e, len(sent), delay
            )
            _drop(shard, range_id, batch.done)
            return handled + len(batch.done)
        for record, ack in zip(sent, acks, strict=True):
            if ack.done:
                batch.done += batch.by_run.pop(record.execution_id, [])
            elif ack.retry:
                retry = True
            else:
                # A document OpenSearch will not take (say, a mapping conflict): the run's rows fail on
                # their own, and are parked if it keeps refusing it.
                batch.failed(
                    record.execution_id, RuntimeError(f"OpenSearch refused the document: {ack.error}")
                )
        _drop(shard, range_id, batch.done)
        handled += len(batch.done)
        if retry:
            delay = backoff.failed()
            log.warning("OpenSearch deferred some documents; retrying in %.1fs", delay)
            return handled
        backoff.succeeded()
    return handled


# --- rebuilding the index ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reindexed:
    total: int
    """Runs read from the database."""
    written: int
    """Documents OpenSearch took or already had at this version or newer."""
    refused: int
    index: str


def _pages(batch: int) -> Iterator[list[tuple[Record, int]]]:
    last = -1
    while True:
        page = _read("v.execution_id > %s", [last], limit=batch)
        if not page:
            return
        yield page
        last = page[-1][0].execution_id


def reindex(
    *, fresh: bool = False, batch: int = BATCH, progress: Callable[[int, int], None] | None = None
) -> Reindexed:
    """Write every run's current record to OpenSearch.

    Args:
        fresh: build a new index from the template, point the alias at it, drop the old one, then make
            a second pass for the runs that changed meanwhile (their workers wrote to the old index).
            Without it the records go to the live index; external versions make that safe to run at
            any time, next to the workers.
        batch: runs per bulk request.
        progress: called with (runs done, runs in all) after each batch.

    Raises:
        opensearchpy.exceptions.TransportError, ConnectionError: OpenSearch failed (run it again:
            every step is idempotent).
    """
    from visibility.backends.opensearch.backend import OpenSearchBackend

    index = backend()
    if not isinstance(index, OpenSearchBackend):
        raise RuntimeError("reindex needs PERDURA_VISIBILITY=opensearch and PERDURA_OPENSEARCH_URL")
    total = sql_count()
    cache: dict[uuid.UUID, dict[str, SaType]] = {}
    passes = 2 if fresh else 1
    target = index.create_index(clock.now().strftime("r%Y%m%d%H%M%S")) if fresh else None
    if not fresh:
        index.ensure_index()
    done = written = refused = 0
    for n in range(passes):
        for page in _pages(batch):
            acks = index.bulk_index(_items(page, cache), index=target, refresh=False)
            written += sum(a.done for a in acks)
            refused += sum(not a.done for a in acks)
            done += len(page)
            if progress is not None:
                progress(done, total * passes)
        if fresh and n == 0:
            assert target is not None
            old = index.switch_alias(target)
            for name in old:
                index.client.indices.delete(index=name)
            target = None
    index.refresh()
    return Reindexed(total=total, written=written, refused=refused, index=index.index)


def sql_count() -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {sql_records.TABLE}")
        return int(cursor.fetchone()[0])
