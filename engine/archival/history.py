"""Archiving a run's history before its retention deletion, and reading it back.

What is archived is the run's history batches as the database stores them, less only the outer
namespace-key layer: each batch is opened in this process's memory (as every history read does), the
batches are compressed together, and the whole is sealed again under the namespace's current data key
(engine/archival/layout.py). Payloads of a data subject stay sealed under the subject's key inside, and
are never opened here: destroying the subject's key (`perdura erase`) erases them from the archive too.
Nothing travels to the store unsealed.

`archive` writes the object, reads it back, compares its SHA-256 and opens its namespace-key layer (the
key must open it and events 1..N must be there, read without opening a subject's payload), and only then is the run's location recorded (`record_txn`), in the fenced transaction
that lets the deletion steps go on: a run is deleted only after its archive is verified.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from cryptography.exceptions import InvalidTag
from django.db import connections
from perdura import clock
from temporalio.api.common.v1 import Payload
from temporalio.api.history.v1 import History, HistoryEvent

from engine.archival import layout, s3
from engine.models import Execution, HistoryArchive, HistoryBatch
from engine.persistence import encryption, subject_seal
from tenants import archival, datakeys
from tenants.models import Namespace


class ArchiveCheckFailed(Exception):
    """The object read back is not the object written (missing, another checksum, or does not open)."""


@dataclass(frozen=True, slots=True)
class Archived:
    """A run's verified archive: what `record_txn` keeps."""

    namespace_id: uuid.UUID
    workflow_id: str
    run_id: str
    close_time: datetime
    uri: str
    bucket: str
    key: str
    sha256: str
    size_bytes: int
    events: int
    data_key_version: int


def _subject_keys(plain: bytes) -> set[str]:
    """The subject keys a batch's sealed payloads need (none for a run without a data subject)."""
    if not plain.startswith(subject_seal.MARK):
        return set()
    found: set[str] = set()

    def note(payload: Payload) -> None:
        if payload.metadata.get("encoding") == subject_seal.SEALED:
            found.add(payload.metadata.get(subject_seal.KEY_METADATA, b"").decode("ascii", "replace"))

    subject_seal.each_payload(History.FromString(plain[len(subject_seal.MARK) :]), note)
    return found


BatchRow = tuple[int, int, bytes]
"""A stored history batch: its first and last event ids and its sealed bytes."""

_BATCH_COLUMNS = ("first_event_id", "last_event_id", "data")


def _stored_batches(execution_pk: int) -> list[BatchRow]:
    # One plain query: the run's batches are all held for the object anyway (a server-side cursor cost
    # more than the rest of the archive step).
    rows = HistoryBatch.objects.filter(execution_id=execution_pk).order_by("first_event_id")
    return list(rows.values_list(*_BATCH_COLUMNS))


SHORT_HISTORY_EVENTS = 500
"""Runs of up to this many events have their batches read together with their group's (`archive_many`):
a group's memory stays small, and a long history is read on its own."""


def _group_batches(executions: list[Execution]) -> dict[int, list[BatchRow]]:
    """The stored batches of the short runs among `executions`, in one query."""
    short = [e.pk for e in executions if e.next_event_id <= SHORT_HISTORY_EVENTS + 1]
    found: dict[int, list[BatchRow]] = {pk: [] for pk in short}
    rows = HistoryBatch.objects.filter(execution_id__in=short).order_by("execution_id", "first_event_id")
    for pk, first, last, data in rows.values_list("execution_id", *_BATCH_COLUMNS):
        found[pk].append((first, last, data))
    return found


def build(execution: Execution, stored: list[BatchRow] | None = None) -> tuple[bytes, int, int]:
    """The run's archive object (from its `stored` batches when they were read already); with the data
    key version sealing it and the number of events."""
    namespace_id = execution.namespace_id
    batches: list[layout.Batch] = []
    subject_keys: set[str] = set()
    for first, last, data in stored if stored is not None else _stored_batches(execution.pk):
        plain = encryption.unseal(
            namespace_id, data, encryption.history_aad(namespace_id, execution.run_id, first)
        )
        subject_keys |= _subject_keys(plain)
        batches.append(layout.Batch(first, last, plain))
    events = batches[-1].last_event_id if batches else 0
    version, _ = datakeys.cipher(namespace_id)
    assert execution.close_time is not None
    header = layout.header_bytes(
        {
            "namespace_id": str(namespace_id),
            "workflow_id": execution.workflow_id,
            "run_id": execution.run_id,
            "workflow_type": execution.workflow_type,
            "status": execution.status,
            "start_time": execution.start_time.isoformat(),
            "close_time": execution.close_time.isoformat(),
            "events": events,
            "batches": len(batches),
            "data_key_version": version,
            "subject_key_ids": sorted(subject_keys),
            "compression": "zlib",
            "cipher": "AES-256-GCM",
        }
    )
    body = encryption.seal(
        namespace_id,
        layout.pack(batches),
        layout.aad(str(namespace_id), execution.run_id, header),
        version=version,
    )
    return layout.assemble(header, body), version, events


def _batches(namespace_id: uuid.UUID, run_id: str, data: bytes) -> list[layout.Batch]:
    """The batches of an archive object, its namespace-key layer opened (subject-sealed payloads not).

    Raises:
        layout.ArchiveFormatError: not an archive, or one of another run.
        cryptography.exceptions.InvalidTag: the body does not open under the namespace's key.
    """
    header, line, sealed = layout.split(data)
    if header.get("namespace_id") != str(namespace_id) or header.get("run_id") != run_id:
        raise layout.ArchiveFormatError("the archive object is another run's")
    body = encryption.unseal(namespace_id, sealed, layout.aad(str(namespace_id), run_id, line))
    return list(layout.unpack(body))


def _event_ids(batches: list[layout.Batch]) -> list[int]:
    """The event ids the batches hold, read without opening any subject-sealed payload."""
    ids: list[int] = []
    for batch in batches:
        plain = batch.data.removeprefix(subject_seal.MARK)
        ids.extend(e.event_id for e in History.FromString(plain).events)
    return ids


def open_events(
    namespace_id: uuid.UUID, run_id: str, data: bytes, *, keep_sealed: bool = False
) -> list[HistoryEvent]:
    """The events of an archive object, its subject-sealed payloads opened (erased markers where the
    subject's key was destroyed), as GetWorkflowExecutionHistory answers them; or left sealed with
    `keep_sealed`, as an export holds them.

    Raises:
        layout.ArchiveFormatError: not an archive, or one of another run.
        cryptography.exceptions.InvalidTag: the body does not open under the namespace's key.
    """
    keys = subject_seal.Keys(namespace_id)
    events: list[HistoryEvent] = []
    for batch in _batches(namespace_id, run_id, data):
        events.extend(subject_seal.open_history(batch.data, keys, keep_sealed=keep_sealed).events)
    return events


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A run's archive object, built and sealed, with where it goes: what `_store` writes and verifies."""

    execution: Execution
    location: archival.Location
    key: str
    data: bytes
    version: int
    events: int


def _archives_to(namespace_id: uuid.UUID) -> str | None:
    """The namespace's history archival URI when it archives histories, else None."""
    state, uri = (
        Namespace.objects.filter(pk=namespace_id)
        .values_list("history_archival_state", "history_archival_uri")
        .get()
    )
    return uri if state == archival.State.ENABLED and uri else None


def _prepare(execution: Execution, uri: str, stored: list[BatchRow] | None = None) -> _Prepared:
    location = archival.parse_uri(uri, what="history")
    key = location.key(
        layout.object_name(str(execution.namespace_id), execution.workflow_id, execution.run_id)
    )
    data, version, events = build(execution, stored)
    return _Prepared(execution, location, key, data, version, events)


def _store(prepared: _Prepared) -> Archived:
    """Write the object, read it back and check it (no database access: safe on a store thread).

    Raises:
        s3.StoreError: the store refused or did not answer.
        ArchiveCheckFailed: the object read back differs from the one written.
    """
    execution, location, key = prepared.execution, prepared.location, prepared.key
    digest = layout.checksum(prepared.data)
    s3.put(location.bucket, key, prepared.data)
    back = s3.get(location.bucket, key)
    if back is None:
        raise ArchiveCheckFailed(f"s3://{location.bucket}/{key} is missing right after it was written")
    if layout.checksum(back) != digest:
        raise ArchiveCheckFailed(f"s3://{location.bucket}/{key} read back with another SHA-256")
    try:
        held = _event_ids(_batches(execution.namespace_id, execution.run_id, back))
    except (ValueError, InvalidTag) as e:
        raise ArchiveCheckFailed(
            f"s3://{location.bucket}/{key} does not open: {type(e).__name__} {e}"
        ) from None
    if held != list(range(1, prepared.events + 1)):
        raise ArchiveCheckFailed(
            f"s3://{location.bucket}/{key} does not hold the run's events 1-{prepared.events}"
        )
    assert execution.close_time is not None
    return Archived(
        namespace_id=execution.namespace_id,
        workflow_id=execution.workflow_id,
        run_id=execution.run_id,
        close_time=execution.close_time,
        uri=location.uri,
        bucket=location.bucket,
        key=key,
        sha256=digest,
        size_bytes=len(prepared.data),
        events=prepared.events,
        data_key_version=prepared.version,
    )


def archive(execution_pk: int) -> Archived | None:
    """Write the run's history to its namespace's history archival URI and verify it; None when the
    namespace does not archive histories (or the run is gone).

    Raises:
        s3.StoreError: the store refused or did not answer (the caller's row backs off and retries).
        ArchiveCheckFailed: the object read back differs from the one written.
    """
    execution = Execution.objects.filter(pk=execution_pk).first()
    if execution is None:
        return None
    uri = _archives_to(execution.namespace_id)
    return None if uri is None else _store(_prepare(execution, uri))


STORE_THREADS = s3.POOL_CONNECTIONS
"""Archives of a group built, written and read back at once: a store's round trip (tens of ms on
radosgw) is mostly waiting."""

BACKGROUND_NICE = 10
"""How much lower than the process the store threads run on Linux (nice is per thread there): building,
sealing and checking archives is background work, and a busy machine gives its CPU to the API first."""

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _lower_priority() -> None:
    if sys.platform != "linux":
        return
    me = threading.get_native_id()
    os.setpriority(os.PRIO_PROCESS, me, min(19, os.getpriority(os.PRIO_PROCESS, me) + BACKGROUND_NICE))


def _store_pool() -> ThreadPoolExecutor:
    """The process's store threads, made once: a pool made for each group started its threads anew each
    time (and their connections to the store)."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(
                    STORE_THREADS, thread_name_prefix="archive", initializer=_lower_priority
                )
    return _pool


def _forget_pool_in_child() -> None:
    # A forked child (Celery's prefork pool) has none of its parent's threads: it makes its own.
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool_in_child)


def _archive_on_thread(execution: Execution, uri: str, stored: list[BatchRow]) -> Archived:
    try:
        return _store(_prepare(execution, uri, stored))
    finally:
        # A data key missing from this process's cache is read on this thread's own connection.
        connections.close_all()


def archive_many(execution_pks: list[int]) -> dict[int, Archived | None | Exception]:
    """`archive` for a group of runs, each on its own: by run, its verified archive, None (its namespace
    does not archive histories, or the run is gone), or what archiving it raised. The batches are read
    here, and each object is built, written and verified on the store threads."""
    found: dict[int, Archived | None | Exception] = {}
    executions = list(Execution.objects.filter(pk__in=execution_pks))
    uris = {ns: _archives_to(ns) for ns in {e.namespace_id for e in executions}}
    for namespace_id, uri in uris.items():
        if uri is not None:
            with contextlib.suppress(LookupError):  # each of its runs then fails on its own
                datakeys.cipher(namespace_id)  # read here, not on a store thread's own connection
    archiving = [e for e in executions if uris[e.namespace_id] is not None]
    stored = _group_batches(archiving)
    pending: dict[int, Future[Archived]] = {}
    pool = _store_pool()
    for execution in archiving:
        uri = uris[execution.namespace_id]
        assert uri is not None
        batches = stored.get(execution.pk)
        if batches is None:  # a long history, read on its own
            batches = _stored_batches(execution.pk)
        pending[execution.pk] = pool.submit(_archive_on_thread, execution, uri, batches)
    for pk, future in pending.items():
        try:
            found[pk] = future.result()
        except Exception as e:  # noqa: BLE001 - this run pays for it, never the group
            found[pk] = e
    for pk in execution_pks:
        found.setdefault(pk, None)  # gone, or its namespace does not archive histories
    return found


def record_txn(archived: list[Archived]) -> None:
    """Inside the caller's (fenced) transaction: keep where each run went, in one statement (replacing an
    earlier record of the same run, as an archive step that ran twice rewrote its object)."""
    at = clock.now()
    HistoryArchive.objects.bulk_create(
        [
            HistoryArchive(
                namespace_id=a.namespace_id,
                workflow_id=a.workflow_id,
                run_id=a.run_id,
                close_time=a.close_time,
                uri=a.uri,
                bucket=a.bucket,
                key=a.key,
                sha256=a.sha256,
                size_bytes=a.size_bytes,
                events=a.events,
                data_key_version=a.data_key_version,
                archived_at=at,
            )
            for a in archived
        ],
        update_conflicts=True,
        unique_fields=["namespace", "workflow_id", "run_id"],
        update_fields=[
            "close_time",
            "uri",
            "bucket",
            "key",
            "sha256",
            "size_bytes",
            "events",
            "data_key_version",
            "archived_at",
        ],
    )


def find(namespace_id: uuid.UUID, workflow_id: str, run_id: str) -> HistoryArchive | None:
    """The archive record of the run (the workflow id's newest archived run when `run_id` is empty)."""
    records = HistoryArchive.objects.filter(namespace_id=namespace_id, workflow_id=workflow_id)
    if run_id:
        return records.filter(run_id=run_id).first()
    return records.order_by("-close_time", "-id").first()


def read(record: HistoryArchive, *, keep_sealed: bool = False) -> list[HistoryEvent]:
    """The archived run's events, read from where it went (a data subject's payloads left sealed with
    `keep_sealed`).

    Raises:
        s3.StoreError: the store refused or did not answer.
        ArchiveCheckFailed: the object is missing or does not open.
    """
    data = s3.get(record.bucket, record.key)
    if data is None:
        raise ArchiveCheckFailed(f"the archive s3://{record.bucket}/{record.key} is missing")
    try:
        return open_events(record.namespace_id, record.run_id, data, keep_sealed=keep_sealed)
    except (ValueError, InvalidTag) as e:
        raise ArchiveCheckFailed(
            f"the archive s3://{record.bucket}/{record.key} does not open: {type(e).__name__} {e}"
        ) from None
