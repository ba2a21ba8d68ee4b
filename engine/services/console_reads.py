"""Reads for the web console: a run as DescribeWorkflowExecution shows it, its history by pages, and the
list page's rows as ListWorkflowExecutions (or ListArchivedWorkflowExecutions) returns them. A run that
retention deleted after archiving it is read from its archive, as the gRPC reads do.

The console shows what the gRPC API answers, so it uses the same descriptions (run_descriptions.py)
instead of a second rendering of the same state; these functions are synchronous (Django views call them directly).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflow.v1 import WorkflowExecutionInfo
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine.errors import FailedPrecondition, NotFound
from engine.models import CurrentRun, Execution, HistoryBatch
from engine.persistence import encryption, store, subject_seal
from engine.services import archived_runs, reads
from engine.services.run_descriptions import describe_execution, execution_info
from visibility import registry, selectors


@dataclass(frozen=True, slots=True)
class RunView:
    """A run as the console shows it: its row, its describe answer, its first and closing events."""

    execution: Execution
    """The run's row; for an archived run, an unsaved stand-in carrying its ids and event count."""
    describe: rr.DescribeWorkflowExecutionResponse
    started: HistoryEvent | None
    closed: HistoryEvent | None
    archived_events: tuple[HistoryEvent, ...] | None = None
    """Every event of a run read from its archive (its rows are gone); None for a run in the hot store."""

    @property
    def archived(self) -> bool:
        return self.archived_events is not None


def run_view(*, namespace_id: uuid.UUID, workflow_id: str, run_id: str) -> RunView:
    """The run, described as DescribeWorkflowExecution answers, with its start and close events.

    A run that retention deleted is read from its archive when it was archived (the whole object, once).

    Raises:
        NotFound: no such run in the namespace, nor in its archive.
        Unavailable: the run is archived and the store does not answer.
        FailedPrecondition: the run is archived and its archive is missing or does not open.
    """

    try:
        snapshot = reads.run_snapshot(namespace_id=namespace_id, workflow_id=workflow_id, run_id=run_id)
    except NotFound:
        archived = _archived_run_view(namespace_id=namespace_id, workflow_id=workflow_id, run_id=run_id)
        if archived is None:
            raise
        return archived
    started = next(store.history_events(snapshot.execution, first_event_id=1, last_event_id=1), None)
    return RunView(
        execution=snapshot.execution,
        describe=describe_execution(snapshot),
        started=started,
        closed=reads.close_event(snapshot.execution),
    )


def _archived_run_view(*, namespace_id: uuid.UUID, workflow_id: str, run_id: str) -> RunView | None:
    archived = reads.archived_history(namespace_id=namespace_id, workflow_id=workflow_id, run_id=run_id)
    if archived is None:
        return None
    found_run_id, events = archived
    try:
        describe = archived_runs.describe_archived(events, run_id=found_run_id)
    except archived_runs.NotAnArchivedRun as e:
        raise FailedPrecondition(str(e)) from None
    info = describe.workflow_execution_info
    # Never saved: the pages read the run's ids and event count from it, and nothing reads its rows.
    stand_in = Execution(
        namespace_id=namespace_id,
        workflow_id=workflow_id,
        run_id=found_run_id,
        workflow_type=info.type.name,
        task_queue=info.task_queue,
        status=info.status,
        next_event_id=events[-1].event_id + 1,
        db_version=0,
    )
    return RunView(
        execution=stand_in,
        describe=describe,
        started=events[0],
        closed=events[-1],
        archived_events=tuple(events),
    )


def run_page(run: RunView, *, after_event_id: int, page_size: int, descending: bool) -> list[HistoryEvent]:
    """A page of the run's history as run_events pages it, from the archived events for an archived run."""
    if run.archived_events is None:
        return run_events(
            run.execution, after_event_id=after_event_id, page_size=page_size, descending=descending
        )
    events = run.archived_events
    last = len(events)
    if descending:
        before = after_event_id if 0 < after_event_id <= last else last + 1
        return archived_runs.reverse_page(list(events), before_event_id=before, page_size=page_size)
    return [e for e in events if e.event_id > after_event_id][:page_size]


def run_whole_history(run: RunView) -> tuple[HistoryEvent, ...]:
    """Every event of the run (run_history; the archived events for an archived run)."""
    return run.archived_events if run.archived_events is not None else run_history(run.execution)


def current_run_id(*, namespace_id: uuid.UUID, workflow_id: str) -> str:
    """The newest run of the workflow id ('' when none), for a 'latest run' link."""
    row = (
        CurrentRun.objects.filter(namespace_id=namespace_id, workflow_id=workflow_id).values("run_id").first()
    )
    return row["run_id"] if row else ""


def run_events(
    execution: Execution, *, after_event_id: int, page_size: int, descending: bool
) -> list[HistoryEvent]:
    """A page of the run's history: `page_size` events after `after_event_id` (ascending), or before it
    (descending, newest first; 0 means from the newest). Only the batches that hold the page are read."""
    last = execution.next_event_id - 1
    if descending:
        before = after_event_id if 0 < after_event_id <= last else last + 1
        return reads.history_reverse_page(execution, before_event_id=before, page_size=page_size)
    first = max(after_event_id + 1, 1)
    if first > last:
        return []
    events = store.history_events(
        execution, first_event_id=first, last_event_id=min(first + page_size - 1, last)
    )
    return list(events)


def run_all_events(execution: Execution) -> Iterator[HistoryEvent]:
    """Every event of the run, in order (the compact view groups them).

    The same decryption as store.history_events, but the batches are read as bare (first event id, data)
    rows: a 10,000-event history is often 10,000 batches, and making a model instance of each took more
    time than decrypting them (about 190 of 350 ms).
    """
    last = execution.next_event_id - 1
    keys = subject_seal.Keys(execution.namespace_id)
    rows = (
        HistoryBatch.objects.filter(execution=execution, first_event_id__lte=last)
        .order_by("first_event_id")
        .values_list("first_event_id", "data")
        .iterator(chunk_size=2000)
    )
    for first_event_id, data in rows:
        plain = encryption.unseal(
            execution.namespace_id,
            bytes(data),
            encryption.history_aad(execution.namespace_id, execution.run_id, first_event_id),
        )
        for event in subject_seal.open_history(plain, keys).events:
            if event.event_id > last:
                return
            yield event


def run_list_page(
    *, namespace_id: uuid.UUID, query: str, page_size: int, page_token: bytes
) -> tuple[list[WorkflowExecutionInfo], bytes]:
    """A page of runs as ListWorkflowExecutions returns them, and the next page's token.

    Raises:
        QueryError: a bad filter or page token.
    """

    records, token = selectors.execution_list(
        namespace_id=namespace_id, query=query, page_size=page_size, page_token=page_token
    )
    custom = registry.custom_types(namespace_id)
    return [execution_info(r, custom) for r in records], token


def archived_list_page(
    *, namespace_id: uuid.UUID, query: str, page_size: int, page_token: bytes
) -> tuple[list[WorkflowExecutionInfo], bytes]:
    """A page of the namespace's archive index as ListArchivedWorkflowExecutions returns it, and the next
    page's token.

    Raises:
        QueryError: a bad filter or page token.
    """
    records, token = selectors.archived_execution_list(
        namespace_id=namespace_id, query=query, page_size=page_size, page_token=page_token
    )
    custom = registry.custom_types(namespace_id)
    return [execution_info(r, custom) for r in records], token


__all__ = [
    "archived_list_page",
    "NotFound",
    "RunView",
    "current_run_id",
    "run_all_events",
    "run_events",
    "run_history",
    "run_list_page",
    "run_page",
    "run_view",
    "run_whole_history",
]


def run_version(execution_pk: int) -> int | None:
    """The run's version (bumped by every committed mutation), None when it is gone: a live page that
    shows this version has nothing to re-read."""
    return Execution.objects.filter(pk=execution_pk).values_list("db_version", flat=True).first()


# --- the whole history, kept for a while ---------------------------------------------------------------

HISTORY_CACHE_RUNS = 8
"""Runs whose parsed history a process keeps (the newest used)."""
HISTORY_CACHE_MIN_EVENTS = 1000
"""Shorter histories are read whole each time: they cost little."""
HISTORY_CACHE_SECONDS = 30.0
"""How long a kept history is extended rather than read again. Bounds how long a page may still show
payloads after their subject key is destroyed (erasure), and the memory of runs nobody looks at."""


@dataclass(frozen=True, slots=True)
class _Kept:
    events: tuple[HistoryEvent, ...]
    read_at: float


_kept: OrderedDict[tuple[uuid.UUID, str], _Kept] = OrderedDict()
_kept_lock = threading.Lock()


def _read_events(execution: Execution, *, after: int, last: int) -> list[HistoryEvent]:
    """Events after..last as run_all_events reads them, from the batches that start after `after`."""
    keys = subject_seal.Keys(execution.namespace_id)
    rows = (
        HistoryBatch.objects.filter(execution=execution, first_event_id__gt=after, first_event_id__lte=last)
        .order_by("first_event_id")
        .values_list("first_event_id", "data")
        .iterator(chunk_size=2000)
    )
    events: list[HistoryEvent] = []
    for first_event_id, data in rows:
        plain = encryption.unseal(
            execution.namespace_id,
            bytes(data),
            encryption.history_aad(execution.namespace_id, execution.run_id, first_event_id),
        )
        events.extend(e for e in subject_seal.open_history(plain, keys).events if e.event_id <= last)
    return events


def run_history(execution: Execution) -> tuple[HistoryEvent, ...]:
    """Every event of the run up to its row's next event id, in order: what the timeline and the compact
    view draw on each render, live updates included.

    A long history (HISTORY_CACHE_MIN_EVENTS and more) is kept parsed in this process for
    HISTORY_CACHE_SECONDS, keyed by its namespace and run id: later renders read only the batches appended
    since, as a history only grows. The caller has already checked that the viewer may see the run.
    """
    last = execution.next_event_id - 1
    key = (execution.namespace_id, execution.run_id)
    moment = time.monotonic()
    with _kept_lock:
        kept = _kept.get(key)
    events: tuple[HistoryEvent, ...] | None = None
    read_at = moment
    if kept is not None and moment - kept.read_at < HISTORY_CACHE_SECONDS and len(kept.events) <= last:
        have = len(kept.events)
        fresh = _read_events(execution, after=have, last=last) if have < last else []
        # Ids are dense from 1: the kept events are 1..have, and the new ones must follow on exactly.
        if [e.event_id for e in fresh] == list(range(have + 1, last + 1)):
            events, read_at = kept.events + tuple(fresh), kept.read_at
    if events is None:
        events = tuple(_read_events(execution, after=0, last=last))
    if last >= HISTORY_CACHE_MIN_EVENTS and len(events) == last:
        with _kept_lock:
            _kept[key] = _Kept(events=events, read_at=read_at)
            _kept.move_to_end(key)
            while len(_kept) > HISTORY_CACHE_RUNS:
                _kept.popitem(last=False)
    return events
