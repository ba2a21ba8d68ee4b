"""Queries and updates asked from the web console: sent to the run's worker, answered or timed out.

The same services as QueryWorkflow and UpdateWorkflowExecution (engine.services.workflow_queries and
.updates) with a bounded wait for the worker. These are coroutines: a web process serves every page's
synchronous views on one thread, which a wait of seconds must not hold. The wait re-reads the row on
every in-process wake-up (engine.notify: `perdura dev`) and at least every RECHECK_SECONDS (a
`perdura web` process is not told of other processes' commits).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import QueryRejectCondition, QueryResultType
from temporalio.api.query.v1 import WorkflowQuery
from temporalio.api.update.v1 import Input, Meta, Outcome, Request
from temporalio.api.workflowservice.v1 import RespondQueryTaskCompletedRequest

from engine import notify, validation
from engine.errors import DeadlineExceeded, InvalidArgument
from engine.history import updates as update_rules
from engine.persistence import query_rows as parked_queries
from engine.services import updates
from engine.services import workflow_queries as queries
from tenants.models import Namespace

RECHECK_SECONDS = 0.25
STICKY_SECONDS = 5.0
"""A query left unclaimed this long on the worker's sticky queue moves to the normal one, as the gRPC
API's does: the worker that cached the run may be gone."""
STACK_TRACE_QUERY = "__stack_trace"

T = TypeVar("T")


async def _db(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    def call() -> T:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return await sync_to_async(call, thread_sensitive=False)()


def _timeout_message(task_queue: str) -> str:
    return (
        f"no worker answered within the time allowed on task queue {task_queue!r}; "
        "check that a worker for this workflow is running"
    )


async def query_ask(
    *,
    namespace: Namespace,
    workflow_id: str,
    run_id: str,
    query_type: str,
    args: Payloads | None,
    timeout: float,
) -> Payloads | None:
    """The worker's answer to a query (None: it answered with no value).

    Raises:
        NotFound: no such run.
        InvalidArgument: no query type, or the worker's handler failed (its message).
        FailedPrecondition: the run cannot be queried now (the service's reasons).
        DeadlineExceeded: no worker answered within `timeout` seconds.
    """
    if not query_type:
        raise InvalidArgument("QueryType is not set on request.")
    if args is not None:
        validation.blob_size(args, "query args")
    submitted = await _db(
        queries.query_submit,
        namespace=namespace,
        workflow_id=workflow_id,
        run_id=run_id,
        query=WorkflowQuery(query_type=query_type, query_args=args),
        reject_condition=QueryRejectCondition.QUERY_REJECT_CONDITION_NONE,
        wait=timedelta(seconds=timeout),
    )
    assert isinstance(submitted, queries.Submitted)  # no reject condition: never Rejected
    try:
        answer = await _query_answer(submitted, namespace, timeout)
    finally:
        await _db(queries.query_finish, submitted.query_id)
    if answer is None:
        raise DeadlineExceeded(_timeout_message(submitted.task_queue))
    if answer.completed_type == QueryResultType.QUERY_RESULT_TYPE_FAILED:
        raise InvalidArgument(answer.error_message or answer.failure.message or "the query failed")
    return answer.query_result if answer.HasField("query_result") else None


async def _query_answer(
    submitted: queries.Submitted, namespace: Namespace, timeout: float
) -> RespondQueryTaskCompletedRequest | None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    sticky_since: float | None = None
    with notify.hub.waiter(notify.query_key(submitted.query_id)) as waiter:
        while True:
            status = await _db(queries.query_status, submitted.query_id)
            if status.answer is not None:
                return status.answer
            now = loop.time()
            if now >= deadline:
                return None
            if status.task_queue and status.task_queue not in (submitted.task_queue, parked_queries.PARKED):
                sticky_since = now if sticky_since is None else sticky_since
                if now - sticky_since >= STICKY_SECONDS:
                    await _db(
                        queries.query_move,
                        submitted.query_id,
                        namespace=namespace,
                        from_queue=status.task_queue,
                        task_queue=submitted.task_queue,
                    )
                    continue
            await waiter.wait(min(deadline - now, RECHECK_SECONDS))
            waiter.rearm()


@dataclass(frozen=True, slots=True)
class UpdateAnswer:
    """Where an update stands when the wait ended."""

    update_id: str
    run_id: str
    stage: int
    outcome: Outcome | None
    """Its result or failure, once completed; None when the wait ended before the worker finished it."""


async def update_ask(
    *,
    namespace: Namespace,
    workflow_id: str,
    run_id: str,
    name: str,
    args: Payloads | None,
    identity: str,
    timeout: float,
) -> UpdateAnswer:
    """Admit an update and wait (bounded) for its outcome.

    Raises:
        NotFound: no such run, or it has closed.
        InvalidArgument: no update name, or arguments too large.
    """
    if not name:
        raise InvalidArgument("Update name is not set on request.")
    if args is not None:
        validation.blob_size(args, "update args")
    update_id = str(uuid.uuid4())
    request = Request(meta=Meta(update_id=update_id, identity=identity), input=Input(name=name, args=args))
    status = await _db(
        updates.update_admit, namespace=namespace, workflow_id=workflow_id, run_id=run_id, request=request
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    with notify.hub.waiter(notify.run_key(status.execution.pk)) as waiter:
        armed = False  # the first re-read comes right after arming: a change before it woke no one
        while status.stage < update_rules.COMPLETED:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            if armed:
                await waiter.wait(min(remaining, RECHECK_SECONDS))
                waiter.rearm()
            armed = True
            status = await _db(
                updates.update_status,
                namespace=namespace,
                workflow_id=workflow_id,
                run_id=status.run_id,
                update_id=update_id,
            )
    return UpdateAnswer(update_id=update_id, run_id=status.run_id, stage=status.stage, outcome=status.outcome)
