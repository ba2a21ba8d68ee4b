"""A start's and a signal's audit entries commit in the transaction of their change (engine/api/audit.py
WRITTEN_WITH_THE_CHANGE): one commit per call where there were two, and never a change without its entry.

Read from Postgres itself: rows written by one transaction share its id (`xmin`). Production only (SQLite
has no transaction ids to compare); `perdura dev` runs the same code path.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest
from temporalio.api.common.v1 import Payloads
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.client import Client
from temporalio.service import RPCError

from tests.support import servers


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("audit-with-change")
    with servers.postgres_database(schema=True) as url, servers.production(tmp, url) as running:
        yield running


def _rows(url: str, sql: str, *args: object) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as db:
        return db.execute(sql, args).fetchall()


def _entries(url: str, workflow_id: str) -> list[tuple[str, str, str]]:
    """(action, outcome, transaction id) of the workflow's audit entries, oldest first."""
    return _rows(
        url,
        "SELECT action, outcome, xmin::text FROM tenants_auditevent WHERE target LIKE %s ORDER BY id",
        f"workflow/{workflow_id}%",
    )


def _batches(url: str, workflow_id: str) -> list[tuple[int, str]]:
    """(first event id, transaction id) of the run's history batches."""
    return _rows(
        url,
        "SELECT b.first_event_id, b.xmin::text FROM engine_historybatch b JOIN engine_execution e"
        " ON e.id = b.execution_id WHERE e.workflow_id = %s ORDER BY b.first_event_id",
        workflow_id,
    )


async def test_a_start_and_a_signal_write_their_entries_in_their_own_transactions(server):
    client = await Client.connect(server.address)
    workflow_id = f"audited-{uuid.uuid4()}"
    handle = await client.start_workflow("Anything", id=workflow_id, task_queue=f"nobody-{uuid.uuid4()}")
    await handle.signal("poke", "x")
    (start_batch, start_txn), (signal_batch, signal_txn) = _batches(server.database_url, workflow_id)
    assert (start_batch, signal_batch) == (1, 3)
    assert _entries(server.database_url, workflow_id) == [
        ("StartWorkflowExecution", "ok", start_txn),
        ("SignalWorkflowExecution", "ok", signal_txn),
    ]


async def test_a_signal_that_changes_nothing_is_still_recorded_with_its_outcome(server):
    client = await Client.connect(server.address)
    workflow_id = f"audited-{uuid.uuid4()}"
    with pytest.raises(RPCError, match="not found"):
        await client.workflow_service.signal_workflow_execution(
            rr.SignalWorkflowExecutionRequest(
                namespace="default",
                workflow_execution={"workflow_id": workflow_id},
                signal_name="poke",
                input=Payloads(),
                request_id=str(uuid.uuid4()),
            )
        )
    assert [(a, o) for a, o, _ in _entries(server.database_url, workflow_id)] == [
        ("SignalWorkflowExecution", "failed")
    ]
