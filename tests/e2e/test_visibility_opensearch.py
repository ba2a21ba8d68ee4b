"""`perdura dev` with the OpenSearch visibility backend, through the official SDK: runs are indexed by
the shard loop from transfer rows; an OpenSearch outage stops nothing and loses nothing; reindex rebuilds.

OpenSearch is osmem-server (or PERDURA_TEST_OPENSEARCH_URL), reached through a TCP proxy the outage
test cuts. The index is near-real-time, so reads poll until the expected answer shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.worker import Worker

from tests.e2e import visibility_workflows as vw
from tests.support import opensearch as support
from tests.support import servers

T = TypeVar("T")


@pytest.fixture(scope="module")
def proxy():
    with support.opensearch_url() as url:
        front = support.Proxy(url)
        front.up()
        yield front
        front.down()


@pytest.fixture(scope="module")
def os_server(tmp_path_factory, proxy):
    index = support.index_name()
    env = {
        "PERDURA_VISIBILITY": "opensearch",
        "PERDURA_OPENSEARCH_URL": proxy.url,
        "PERDURA_OPENSEARCH_INDEX": index,
        "PERDURA_OPENSEARCH_REPLICAS": "0",
        # Few attempts: were an outage charged to the rows, they would be parked within the outage test.
        "PERDURA_SHARD_MAX_ATTEMPTS": "2",
        "PERDURA_RETENTION_MIN_SECONDS": "1",
    }
    with servers.dev_server(tmp_path_factory.mktemp("dev-opensearch"), env=env) as running:
        yield running
    support.drop_index(proxy.target_url, index)


@pytest.fixture
async def os_client(os_server) -> Client:
    client = await Client.connect(os_server.address, namespace="default")
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace="default",
            search_attributes={
                "PerduraCustomer": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
                "PerduraAmount": IndexedValueType.INDEXED_VALUE_TYPE_INT,
                "PerduraTags": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
            },
        )
    )
    return client


async def eventually(fetch: Callable[[], Awaitable[T]], expected: T, timeout: float = 30.0) -> T:
    """Poll until `fetch()` gives `expected` (the index lags the database by a shard loop pass)."""
    deadline = time.monotonic() + timeout
    while True:
        got = await fetch()
        if got == expected or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.1)


async def _start(client: Client, task_queue: str, n: int, *, wait_from: int) -> list:
    handles = []
    for i in range(n):
        handles.append(
            await client.start_workflow(
                vw.TaggedWorkflow.run,
                args=[i * 10, i >= wait_from],
                id=f"vis-os-{uuid.uuid4()}",
                task_queue=task_queue,
                search_attributes=TypedSearchAttributes([SearchAttributePair(vw.CUSTOMER, f"c-{i % 2}")]),
                memo={"index": i},
            )
        )
    return handles


def _pending_transfers(server: servers.Running) -> int:
    """VISIBILITY transfer rows still waiting for OpenSearch, read from the dev server's SQLite file."""
    return int(_sql(server, "SELECT COUNT(*) FROM engine_transfer WHERE kind = 7")[0][0])


def _sql(server: servers.Running, query: str, params: tuple = ()) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(server.db_file, timeout=10)) as db:
        rows = db.execute(query, params).fetchall()
        db.commit()
        return rows


def _ids(client: Client, query: str) -> Callable[[], Awaitable[set[str]]]:
    async def fetch() -> set[str]:
        return {w.id async for w in client.list_workflows(query, page_size=2)}

    return fetch


async def test_list_and_count_through_the_sdk(os_client):
    """Starts, upserts and closes reach the index; list, count and group-by answer from it."""
    task_queue = f"tq-{uuid.uuid4()}"
    scope = f"TaskQueue = '{task_queue}'"
    async with Worker(os_client, task_queue=task_queue, workflows=[vw.TaggedWorkflow]):
        handles = await _start(os_client, task_queue, 4, wait_from=2)
        for handle in handles[:2]:
            await handle.result()
        ids = [h.id for h in handles]
        assert await eventually(_ids(os_client, f"{scope} AND PerduraTags = 'upserted'"), set(ids)) == set(
            ids
        )
        assert await eventually(
            _ids(os_client, f"{scope} AND ExecutionStatus = 'Running'"), set(ids[2:])
        ) == set(ids[2:])
        assert await _ids(os_client, f"{scope} AND PerduraCustomer = 'c-1'")() == {ids[1], ids[3]}
        assert await _ids(os_client, f"{scope} AND PerduraAmount BETWEEN 10 AND 20")() == {ids[1], ids[2]}
        count = await os_client.count_workflows(f"{scope} GROUP BY ExecutionStatus")
        assert sorted((g.group_values[0], g.count) for g in count.groups) == [
            ("Completed", 2),
            ("Running", 2),
        ]

        listed = [w async for w in os_client.list_workflows(scope, page_size=3)]
        assert [w.status for w in listed[:2]] == [WorkflowExecutionStatus.RUNNING] * 2
        second = {w.id: w for w in listed}[ids[1]]
        assert second.typed_search_attributes[vw.AMOUNT] == 10
        assert second.typed_search_attributes[vw.TAGS] == ["upserted"]
        assert await second.memo() == {"index": 1, "stage": "upserted"}

        for handle in handles[2:]:
            await handle.signal(vw.TaggedWorkflow.finish)
            await handle.result()
        assert await eventually(
            _ids(os_client, f"{scope} AND ExecutionStatus = 'Completed'"), set(ids)
        ) == set(ids)


async def test_outage_loses_nothing_and_reindex_rebuilds(os_client, os_server, proxy):
    """With OpenSearch unreachable runs start and finish as usual and their updates wait in transfer
    rows; once it is back the index catches up. `perdura visibility reindex --fresh` rebuilds it."""
    task_queue = f"tq-{uuid.uuid4()}"
    scope = f"TaskQueue = '{task_queue}'"
    async with Worker(os_client, task_queue=task_queue, workflows=[vw.TaggedWorkflow]):
        proxy.down()
        try:
            handles = await _start(os_client, task_queue, 3, wait_from=3)
            assert [await h.result() for h in handles] == ["ok"] * 3
            await asyncio.sleep(4)  # shard loop passes failing with the backoff at 0.5, 1, 2 s
            assert _pending_transfers(os_server) > 0
            # An outage is no row's fault: nothing is charged, nothing parked, however long it lasts.
            charged = "SELECT COUNT(*) FROM engine_transfer WHERE kind = 7 AND (failures > 0 OR parked_at IS NOT NULL)"
            assert _sql(os_server, charged) == [(0,)]
        finally:
            proxy.up()
        ids = {h.id for h in handles}
        query = f"{scope} AND ExecutionStatus = 'Completed' AND PerduraTags = 'upserted'"
        assert await eventually(_ids(os_client, query), ids, timeout=45) == ids

    assert _pending_transfers(os_server) == 0
    out = os_server.cli("visibility", "reindex", "--fresh", "--batch", "7")
    assert "indexed" in out
    assert await eventually(_ids(os_client, query), ids) == ids
    assert (await os_client.count_workflows(scope)).count == 3


async def test_a_run_that_cannot_be_indexed_is_parked_and_the_others_are_indexed(os_client, os_server):
    """A visibility row whose record cannot be turned into a document (its custom attributes a list, not
    an object, in the database) fails on its own: it is charged, parked after its attempts, listed by `perdura shards
    parked`, and redriven once repaired; the other runs are indexed meanwhile."""
    task_queue = f"tq-{uuid.uuid4()}"
    scope = f"TaskQueue = '{task_queue}'"
    async with Worker(os_client, task_queue=task_queue, workflows=[vw.TaggedWorkflow]):
        (first,) = await _start(os_client, task_queue, 1, wait_from=0)
        # Its upsert indexed: the run now waits for a signal and writes no record until then.
        upserted = f"{scope} AND PerduraTags = 'upserted'"
        assert await eventually(_ids(os_client, upserted), {first.id}) == {first.id}
        ((execution_id, shard),) = _sql(
            os_server,
            "SELECT id, shard FROM engine_execution WHERE workflow_id = %s".replace("%s", "?"),
            (first.id,),
        )
        ((custom,),) = _sql(
            os_server,
            "SELECT custom FROM visibility_visibilityrecord WHERE execution_id = ?",
            (execution_id,),
        )
        _sql(
            os_server,
            "UPDATE visibility_visibilityrecord SET custom = '[1]' WHERE execution_id = ?",
            (execution_id,),
        )
        _sql(
            os_server,
            "INSERT INTO engine_transfer (shard, execution_id, kind, event_id, details, created_at) "
            "VALUES (?, ?, 7, 0, x'', '2020-01-01 00:00:00.000000')",
            (shard, execution_id),
        )
        deadline = time.monotonic() + 30
        while True:
            out = os_server.cli("shards", "parked", "--namespace", "default", "--json")
            if first.id in out or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.3)
        (row,) = [json.loads(line) for line in out.splitlines() if first.id in line]
        assert (row["queue"], row["attempts"]) == ("visibility", 2)
        assert row["last_error"].startswith("AttributeError")
        # Meanwhile other runs are indexed as usual.
        (second,) = await _start(os_client, task_queue, 1, wait_from=0)
        assert await eventually(_ids(os_client, upserted), {first.id, second.id}) == {first.id, second.id}

        _sql(
            os_server,
            "UPDATE visibility_visibilityrecord SET custom = ? WHERE execution_id = ?",
            (custom, execution_id),
        )
        assert os_server.cli("shards", "redrive", row["id"]).startswith("1 parked rows")
        for handle in (first, second):
            await handle.signal(vw.TaggedWorkflow.finish)
            await handle.result()
        done = f"{scope} AND ExecutionStatus = 'Completed'"
        assert await eventually(_ids(os_client, done), {first.id, second.id}) == {first.id, second.id}
    assert _sql(os_server, "SELECT COUNT(*) FROM engine_transfer WHERE parked_at IS NOT NULL") == [(0,)]


async def test_retention_deletes_the_document_and_a_late_index_write_cannot_restore_it(os_server, proxy):
    """The run's document goes first, with a tombstone one version above the run's last: OpenSearch
    refuses the write of a processor that read the record before the deletion."""
    from opensearchpy.exceptions import ConflictError

    from tests.e2e.workflows import TimerWorkflow
    from visibility.backends.opensearch.backend import client_from_url

    name = f"ret-os-{uuid.uuid4().hex[:8]}"
    os_server.cli("namespace", "create", name)
    os_server.cli("namespace", "update", name, "--retention", "2s")
    client = await Client.connect(os_server.address, namespace=name)
    queue = f"ret-os-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[TimerWorkflow]):
        handle = await client.start_workflow(
            TimerWorkflow.run, 0.01, id=f"r-{uuid.uuid4()}", task_queue=queue
        )
        assert await handle.result() == "woke"
    (pk, version) = _sql(
        os_server, "SELECT id, db_version FROM engine_execution WHERE workflow_id = ?", (handle.id,)
    )[0]

    async def count() -> int:
        return (await client.count_workflows()).count

    assert await eventually(count, 1) == 1  # indexed
    assert await eventually(count, 0, timeout=15) == 0  # deleted 2 s after its close
    assert _sql(os_server, "SELECT COUNT(*) FROM engine_execution WHERE id = ?", (pk,)) == [(0,)]
    search = client_from_url(proxy.target_url)
    index = os_server.env["PERDURA_OPENSEARCH_INDEX"]
    with pytest.raises(ConflictError):
        search.index(
            index=index, id=str(pk), body={"WorkflowId": handle.id}, version=version, version_type="external"
        )
    # Where no tombstone is, the same write goes in: the refusal above is the tombstone's.
    other = f"never-{uuid.uuid4().hex}"
    search.index(index=index, id=other, body={"WorkflowId": other}, version=version, version_type="external")
    search.delete(index=index, id=other)
