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

import uuid
from dataclasses import dataclass
from datetime import datetime

from cryptography.exceptions import InvalidTag
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


def build(execution: Execution) -> tuple[bytes, int, int]:
    """The run's archive object; with the data key version sealing it and the number of events."""
    namespace_id = execution.namespace_id
    batches: list[layout.Batch] = []
    subject_keys: set[str] = set()
    for batch in HistoryBatch.objects.filter(execution=execution).order_by("first_event_id").iterator():
        plain = encryption.unseal(
            namespace_id,
            batch.data,
            encryption.history_aad(namespace_id, execution.run_id, batch.first_event_id),
        )
        subject_keys |= _subject_keys(plain)
        batches.append(layout.Batch(batch.first_event_id, batch.last_event_id, plain))
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
    state, uri = (
        Namespace.objects.filter(pk=execution.namespace_id)
        .values_list("history_archival_state", "history_archival_uri")
        .get()
    )
    if state != archival.State.ENABLED or not uri:
        return None
    location = archival.parse_uri(uri, what="history")
    key = location.key(
        layout.object_name(str(execution.namespace_id), execution.workflow_id, execution.run_id)
    )
    data, version, events = build(execution)
    digest = layout.checksum(data)
    s3.put(location.bucket, key, data)
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
    if held != list(range(1, events + 1)):
        raise ArchiveCheckFailed(f"s3://{location.bucket}/{key} does not hold the run's events 1-{events}")
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
        size_bytes=len(data),
        events=events,
        data_key_version=version,
    )


def record_txn(archived: Archived) -> None:
    """Inside the caller's (fenced) transaction: keep where the run went (replacing an earlier record of
    the same run, as an archive step that ran twice rewrote its object)."""
    HistoryArchive.objects.update_or_create(
        namespace_id=archived.namespace_id,
        workflow_id=archived.workflow_id,
        run_id=archived.run_id,
        defaults={
            "close_time": archived.close_time,
            "uri": archived.uri,
            "bucket": archived.bucket,
            "key": archived.key,
            "sha256": archived.sha256,
            "size_bytes": archived.size_bytes,
            "events": archived.events,
            "data_key_version": archived.data_key_version,
            "archived_at": clock.now(),
        },
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
