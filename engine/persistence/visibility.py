"""A run's visibility record, written from its own transactions (store.insert / store.persist).

Written when something a filter or a listing shows changes: at start, when search attributes or the
memo change, and when the status changes (close, continue-as-new, reset). Times and ids are plaintext
(they are indexed, DESIGN.md rule 6); the memo is sealed like the run's state.
"""

from __future__ import annotations

import logging
import uuid

from django.conf import settings
from django.db import transaction
from temporalio.api.common.v1 import SearchAttributes
from temporalio.api.enums.v1 import EventType

from engine.history import subjects
from engine.history.mutation import Mutation, NewTransfer, TransferKind
from engine.history.state import MutableState
from engine.models import Execution
from engine.persistence import encryption, subject_seal
from visibility import registry
from visibility.backends import backend
from visibility.backends.base import Record
from visibility.backends.sql import records
from visibility.search_attributes import stored_values, to_micros

log = logging.getLogger(__name__)

# Events after which a run's record must be rewritten even though its status did not change.
_VISIBLE_EVENTS = frozenset(
    {
        EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
        EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED,
    }
)


def indexed_async() -> bool:
    """Whether records also go to OpenSearch through transfer rows (PERDURA_VISIBILITY=opensearch)."""
    return getattr(settings, "PERDURA_VISIBILITY", "sql") == "opensearch"


def memo_aad(namespace_id: uuid.UUID, run_id: str) -> bytes:
    return f"perdura/visibility-memo/{namespace_id}/{run_id}".encode()


def changed(execution: Execution, m: Mutation) -> bool:
    """Whether this mutation changes what visibility shows of the run (cheap: no decoding)."""
    if execution.status != m.state.status or m.search_attributes_changed:
        return True
    return any(e.event_type in _VISIBLE_EVENTS for e in m.events)


def record_write(execution: Execution, state: MutableState, m: Mutation | None = None) -> records.Upsert:
    """The write of the run's visibility record, for the caller's transaction.

    With the OpenSearch backend the mutation also gets a VISIBILITY transfer row: the shard worker
    indexes the record (as it is then) and deletes the row once OpenSearch has it (engine/shards/
    visibility_index.py). The record stays the source of truth, and what `perdura visibility reindex`
    rebuilds the index from.
    """
    if m is not None and indexed_async():
        m.transfers.append(NewTransfer(TransferKind.VISIBILITY, max(state.next_event_id - 1, 0)))
    namespace_id = execution.namespace_id
    search_attributes = b""
    custom: dict[str, object] = {}
    slots: dict[str, str] = {}
    if state.search_attributes:
        parsed = SearchAttributes.FromString(state.search_attributes)
        names = list(parsed.indexed_fields)
        registered = registry.custom_attributes(namespace_id, names=names)
        custom = stored_values(parsed, registered.types)
        slots = registered.slots
        empty = [name for name, p in parsed.indexed_fields.items() if p.data in (b"", b"null")]
        for name in empty:  # a null value at start means "not set", as an upsert of null removes it
            del parsed.indexed_fields[name]
        search_attributes = parsed.SerializeToString() if empty else state.search_attributes
    close = to_micros(state.close_time) if state.close_time is not None else None
    duration = None
    if state.close_time is not None:
        delta = state.close_time - state.execution_time
        duration = max((delta.days * 86400 + delta.seconds) * 10**9 + delta.microseconds * 1000, 0)
    parent = state.parent
    return records.record_upsert(
        Record(
            execution_id=execution.pk,
            namespace_id=namespace_id
            if isinstance(namespace_id, uuid.UUID)
            else uuid.UUID(str(namespace_id)),
            workflow_id=state.workflow_id,
            run_id=state.run_id,
            workflow_type=state.workflow_type,
            task_queue=state.task_queue,
            status=state.status,
            start_time=to_micros(state.start_time),
            execution_time=to_micros(state.execution_time),
            close_time=close,
            execution_duration=duration,
            history_length=state.next_event_id - 1,
            history_size_bytes=state.history_size,
            state_transition_count=state.state_transitions,
            parent_workflow_id=parent.workflow_id if parent else None,
            parent_run_id=parent.run_id if parent else None,
            root_workflow_id=parent.root_workflow_id if parent else state.workflow_id,
            root_run_id=parent.root_run_id if parent else state.run_id,
            first_run_id=state.first_run_id,
            memo=_memo_sealed(namespace_id, state) if state.memo else b"",
            search_attributes=search_attributes,
            custom=custom,
        ),
        slots=slots,
    )


def _memo_sealed(namespace_id: uuid.UUID, state: MutableState) -> bytes:
    subject = subjects.subject_of(state.search_attributes)
    memo = state.memo if subject is None else subject_seal.seal_memo(namespace_id, subject, state.memo)
    return encryption.seal(namespace_id, memo, memo_aad(namespace_id, state.run_id))


def memo_open(namespace_id: uuid.UUID, run_id: str, sealed: bytes) -> bytes:
    """The serialized Memo of a record (empty when the run has none); a data subject's payloads opened,
    or erased markers once the subject's key is destroyed."""
    if not sealed:
        return b""
    return subject_seal.open_memo(
        namespace_id, encryption.unseal(namespace_id, sealed, memo_aad(namespace_id, run_id))
    )


def forget_on_commit(execution_id: int) -> None:
    """Inside the transaction deleting a run: remove its document once that commits (best effort; a
    `reindex --fresh` drops any document this misses). The delete leaves a tombstone one version above
    the run's last, so a late write of the run cannot bring the document back."""
    if not indexed_async():
        return
    db_version = Execution.objects.filter(pk=execution_id).values_list("db_version", flat=True).first() or 0

    def delete() -> None:
        try:
            backend().delete(str(execution_id), db_version + 1)  # type: ignore[attr-defined]  # indexed_async: OpenSearch's
        except Exception:  # noqa: BLE001
            log.warning("could not remove deleted run %s from OpenSearch", execution_id, exc_info=True)

    transaction.on_commit(delete)
