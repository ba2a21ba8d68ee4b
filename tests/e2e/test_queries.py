"""Queries through the official SDK: answered by a worker, never written to history."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio.client import WorkflowQueryFailedError, WorkflowQueryRejectedError
from temporalio.common import QueryRejectCondition
from temporalio.service import RPCError, RPCStatusCode

from tests.e2e import workflows as w
from tests.e2e.conftest import event_types, new_id


@pytest.mark.usefixtures("worker")
async def test_query_sees_signals_and_writes_nothing(client, task_queue):
    handle = await client.start_workflow(w.CounterWorkflow.run, id=new_id(), task_queue=task_queue)
    assert await handle.query(w.CounterWorkflow.current) == 0
    await handle.signal(w.CounterWorkflow.bump)
    await handle.signal(w.CounterWorkflow.bump)
    assert await handle.query(w.CounterWorkflow.current) == 2
    before = await event_types(handle)
    for _ in range(3):
        assert await handle.query(w.CounterWorkflow.current) == 2
    assert await event_types(handle) == before
    assert "QUERY" not in " ".join(before)
    await handle.signal(w.CounterWorkflow.stop)
    assert await handle.result() == 2


@pytest.mark.usefixtures("worker")
async def test_query_of_a_closed_run_is_answered_by_replay(client, task_queue):
    handle = await client.start_workflow(w.CounterWorkflow.run, id=new_id(), task_queue=task_queue)
    await handle.signal(w.CounterWorkflow.bump)
    await handle.signal(w.CounterWorkflow.stop)
    assert await handle.result() == 1
    assert await handle.query(w.CounterWorkflow.current) == 1
    with pytest.raises(WorkflowQueryRejectedError):
        await handle.query(w.CounterWorkflow.current, reject_condition=QueryRejectCondition.NOT_OPEN)


@pytest.mark.usefixtures("worker")
async def test_failing_query_reports_the_error(client, task_queue):
    handle = await client.start_workflow(w.CounterWorkflow.run, id=new_id(), task_queue=task_queue)
    with pytest.raises(WorkflowQueryFailedError) as info:
        await handle.query(w.CounterWorkflow.fails)
    assert "no such thing" in str(info.value)
    with pytest.raises(WorkflowQueryFailedError):
        await handle.query("no-such-query")
    await handle.signal(w.CounterWorkflow.stop)
    await handle.result()


async def test_query_without_a_worker_times_out_clearly(client):
    handle = await client.start_workflow(
        w.CounterWorkflow.run, id=new_id(), task_queue=f"nobody-{uuid.uuid4()}"
    )
    with pytest.raises(RPCError) as info:
        await asyncio.wait_for(handle.query(w.CounterWorkflow.current, rpc_timeout=timedelta(seconds=3)), 10)
    assert info.value.status == RPCStatusCode.DEADLINE_EXCEEDED
    await handle.terminate()
