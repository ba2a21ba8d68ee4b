"""Archival end to end, with the official SDK and the `temporal` CLI against `perdura dev` (SQLite) and the
production processes (Postgres + Celery), archiving to a real S3 protocol server (moto's server mode, or
Ceph's radosgw with PERDURA_TEST_S3=radosgw, tests/support/s3.py):
runs of a namespace kept 2 s are archived, listed by a filter over a custom search attribute, read back
(SDK fetch_history, `temporal workflow show`) after their rows are gone from the hot store; a store that
is down holds the deletion until it is back; a URI changed between two runs leaves both readable; a key
of another namespace cannot read this namespace's archive."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.api.workflowservice.v1 import (
    DescribeWorkflowExecutionRequest,
    GetWorkflowExecutionHistoryRequest,
    GetWorkflowExecutionHistoryReverseRequest,
    ListArchivedWorkflowExecutionsRequest,
)
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from engine.persistence import subject_seal
from tests.conftest import SERVER_ENV
from tests.e2e.test_auth import connect, create_key
from tests.e2e.test_retention import _query
from tests.e2e.workflows import HelloWorkflow, greet
from tests.support import servers
from tests.support.batches import temporal
from tests.support.s3 import restartable_s3

BUCKET = "perdura-archive"
CUSTOMER = SearchAttributeKey.for_keyword("CustomerId")
DATA_SUBJECT = SearchAttributeKey.for_keyword("PerduraDataSubject")


@pytest.fixture(scope="module", params=["dev", "postgres"])
def archival(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """(a Perdura whose S3 is moto's server or radosgw, that S3 server): the store can be stopped and
    started."""
    with restartable_s3(request) as store:
        store.ensure_bucket(BUCKET)
        env = {**SERVER_ENV, **store.env}
        tmp = tmp_path_factory.mktemp(f"archival-{request.param}")
        if request.param == "dev":
            with servers.dev_server(tmp, env=env) as running:
                yield running, store
        else:
            with (
                servers.postgres_database(schema=True) as url,
                servers.production(tmp, url, env=env) as running,
            ):
                yield running, store


async def archiving_namespace(server, *, org: str | None = None, prefix: str = "runs") -> tuple[str, Client]:
    """A namespace kept 2 s that archives history and visibility (set with the `temporal` CLI), with the
    CustomerId attribute; and a client of it."""
    name = f"arc-{uuid.uuid4().hex[:8]}"
    server.cli("namespace", "create", name, *(["--org", org] if org else []))
    if org:
        name = f"{name}.{org}"
    server.cli("namespace", "update", name, "--retention", "2s")
    await temporal(
        "operator",
        "namespace",
        "update",
        "--history-archival-state",
        "enabled",
        "--history-uri",
        f"s3://{BUCKET}/{prefix}/history",
        "--visibility-archival-state",
        "enabled",
        "--visibility-uri",
        f"s3://{BUCKET}/{prefix}/visibility",
        address=server.address,
        namespace=name,
    )
    client = await Client.connect(server.address, namespace=name)
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=name, search_attributes={"CustomerId": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD}
        )
    )
    return name, client


async def run_hello(client: Client, customer: str) -> WorkflowHandle:
    queue = f"arc-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[HelloWorkflow], activities=[greet]):
        handle = await client.start_workflow(
            HelloWorkflow.run,
            customer,
            id=f"order-{customer}-{uuid.uuid4()}",
            task_queue=queue,
            search_attributes=TypedSearchAttributes([SearchAttributePair(CUSTOMER, customer)]),
        )
        assert await handle.result() == f"hello {customer}"
    return handle


def hot_rows(server, workflow_ids: list[str]) -> dict[str, int]:
    """Rows of these workflows left in the hot store's run, history and visibility tables."""
    marks = ", ".join("?" for _ in workflow_ids)
    ids = tuple(workflow_ids)
    counts = {
        "engine_execution": _query(
            server, f"SELECT COUNT(*) FROM engine_execution WHERE workflow_id IN ({marks})", ids
        ),
        "engine_historybatch": _query(
            server,
            "SELECT COUNT(*) FROM engine_historybatch h JOIN engine_execution e ON e.id = h.execution_id "
            f"WHERE e.workflow_id IN ({marks})",
            ids,
        ),
        "visibility_visibilityrecord": _query(
            server, f"SELECT COUNT(*) FROM visibility_visibilityrecord WHERE workflow_id IN ({marks})", ids
        ),
    }
    return {table: rows[0][0] for table, rows in counts.items() if rows[0][0]}


async def wait_deleted(server, workflow_ids: list[str], seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    for _ in range(int(seconds * 4)):
        if not hot_rows(server, workflow_ids) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.25)
    assert hot_rows(server, workflow_ids) == {}


async def list_archived(client: Client, namespace: str, query: str) -> list[str]:
    found: list[str] = []
    token = b""
    while True:
        page = await client.workflow_service.list_archived_workflow_executions(
            ListArchivedWorkflowExecutionsRequest(
                namespace=namespace, query=query, page_size=1, next_page_token=token
            )
        )
        found += [e.execution.workflow_id for e in page.executions]
        token = page.next_page_token
        if not token:
            return found


async def test_archived_runs_are_listed_by_filter_and_read_back_after_deletion(archival):
    server, store = archival
    name, client = await archiving_namespace(server)
    described = await temporal(
        "operator", "namespace", "describe", "-o", "json", address=server.address, namespace=name
    )
    config = json.loads(described.stdout)["config"]
    assert config["historyArchivalState"] == "ARCHIVAL_STATE_ENABLED"
    assert config["historyArchivalUri"] == f"s3://{BUCKET}/runs/history"
    assert config["visibilityArchivalUri"] == f"s3://{BUCKET}/runs/visibility"

    acme = await run_hello(client, "acme")
    globex = await run_hello(client, "globex")
    acme_events = [e async for e in acme.fetch_history_events()]
    await wait_deleted(server, [acme.id, globex.id])

    # Listed by a filter over the custom attribute, through the API and the CLI.
    assert await list_archived(client, name, "CustomerId = 'acme'") == [acme.id]
    assert await list_archived(client, name, "CustomerId IN ('acme', 'globex') ORDER BY StartTime ASC") == [
        acme.id,
        globex.id,
    ]
    assert await list_archived(
        client, name, "WorkflowType = 'HelloWorkflow' AND NOT CustomerId = 'acme'"
    ) == [globex.id]
    listed = await temporal(
        "workflow",
        "list",
        "--archived",
        "--query",
        "CustomerId = 'acme'",
        address=server.address,
        namespace=name,
    )
    assert acme.id in listed.stdout
    assert globex.id not in listed.stdout
    assert (await client.count_workflows()).count == 0  # the live visibility has nothing left

    # Read back from the archive: the SDK's fetch_history and `temporal workflow show`.
    history = await client.get_workflow_handle(acme.id, run_id=acme.result_run_id).fetch_history()
    assert list(history.events) == acme_events
    latest = await client.get_workflow_handle(globex.id).fetch_history()  # no run id: the newest archived
    assert latest.events[-1].HasField("workflow_execution_completed_event_attributes")
    shown = await temporal(
        "workflow",
        "show",
        "-w",
        acme.id,
        "-r",
        acme.result_run_id or "",
        "-o",
        "json",
        address=server.address,
        namespace=name,
    )
    assert len(json.loads(shown.stdout)["events"]) == len(acme_events)

    # The objects are in the bucket where the namespace's URI said, sealed.
    objects = store.client().list_objects_v2(Bucket=BUCKET, Prefix="runs/history/")["Contents"]
    keys = [o["Key"] for o in objects]
    assert any(k.endswith(f"/{acme.result_run_id}.history") for k in keys)
    data = (
        store.client()
        .get_object(Bucket=BUCKET, Key=next(k for k in keys if acme.result_run_id in k))["Body"]
        .read()
    )
    assert b"hello acme" not in data


async def test_a_store_that_is_down_holds_the_deletion_until_it_is_back(archival):
    server, store = archival
    name, client = await archiving_namespace(server)
    store.stop()
    try:
        handle = await run_hello(client, "initech")
        # The retention row comes due 2 s after the close; its ARCHIVE step fails and backs off.
        deadline = time.monotonic() + 20
        failures = 0
        while time.monotonic() < deadline and failures < 2:
            rows = _query(
                server,
                "SELECT r.failures, r.last_error FROM engine_retention r JOIN engine_execution e "
                "ON e.id = r.execution_id WHERE e.workflow_id = ?",
                (handle.id,),
            )
            failures = rows[0][0] if rows else 0
            await asyncio.sleep(0.25)
        assert failures >= 2, "the archive step was not retried while the store was down"
        assert "StoreError" in rows[0][1]
        left = hot_rows(server, [handle.id])
        assert left["engine_execution"] == 1  # nothing deleted
        assert left["engine_historybatch"] >= 1
        assert left["visibility_visibilityrecord"] == 1
    finally:
        store.start()
    # Retried with backoff (at most 8 s after two failures, more if the server counted more): archived
    # and deleted once the store answers.
    await wait_deleted(server, [handle.id], seconds=45)
    history = await client.get_workflow_handle(handle.id).fetch_history()
    assert history.events[-1].HasField("workflow_execution_completed_event_attributes")


async def test_a_uri_changed_between_two_runs_leaves_both_readable(archival):
    server, store = archival
    name, client = await archiving_namespace(server, prefix=f"first-{uuid.uuid4().hex[:6]}")
    first = await run_hello(client, "first")
    await wait_deleted(server, [first.id])
    second_prefix = f"second-{uuid.uuid4().hex[:6]}"
    out = server.cli("namespace", "update", name, "--history-uri", f"s3://{BUCKET}/{second_prefix}")
    assert f"history archival enabled, s3://{BUCKET}/{second_prefix}" in out
    second = await run_hello(client, "second")
    await wait_deleted(server, [second.id])

    for handle, who in ((first, "first"), (second, "second")):
        history = await client.get_workflow_handle(handle.id, run_id=handle.result_run_id).fetch_history()
        result = history.events[-1].workflow_execution_completed_event_attributes.result.payloads[0].data
        assert json.loads(result) == f"hello {who}"
    listed = store.client().list_objects_v2(Bucket=BUCKET, Prefix=f"{second_prefix}/")
    assert [o["Key"].rsplit("/", 1)[-1] for o in listed["Contents"]] == [f"{second.result_run_id}.history"]


async def test_a_key_reads_its_own_namespaces_archive_and_no_other(archival):
    server, _ = archival
    org = f"o{uuid.uuid4().hex[:6]}"
    server.cli("org", "create", org, "--owner", f"owner@{org}.example")
    mine, client = await archiving_namespace(server, org=org)
    theirs, _ = await archiving_namespace(server, org=org)
    handle = await run_hello(client, "private")
    await wait_deleted(server, [handle.id])
    reader = create_key(server, org, mine, "reader", "archive reader")
    other = create_key(server, org, theirs, "admin", "other namespace admin")

    own = await connect(server, mine, reader)
    assert await list_archived(own, mine, "CustomerId = 'private'") == [handle.id]
    history = await own.get_workflow_handle(handle.id).fetch_history()
    assert history.events[0].HasField("workflow_execution_started_event_attributes")

    stranger = await connect(server, theirs, other)
    for call in (
        lambda: list_archived(stranger, mine, ""),
        lambda: stranger.workflow_service.get_workflow_execution_history(
            GetWorkflowExecutionHistoryRequest(
                namespace=mine, execution=WorkflowExecution(workflow_id=handle.id)
            )
        ),
        lambda: stranger.workflow_service.describe_workflow_execution(
            DescribeWorkflowExecutionRequest(
                namespace=mine, execution=WorkflowExecution(workflow_id=handle.id)
            )
        ),
        lambda: stranger.workflow_service.get_workflow_execution_history_reverse(
            GetWorkflowExecutionHistoryReverseRequest(
                namespace=mine, execution=WorkflowExecution(workflow_id=handle.id)
            )
        ),
    ):
        with pytest.raises(RPCError) as refused:
            await call()
        assert refused.value.status == RPCStatusCode.PERMISSION_DENIED
    # Its own namespace's archive, asked for the same run, has nothing of it.
    assert await list_archived(stranger, theirs, "") == []
    with pytest.raises(RPCError) as missing:
        await stranger.get_workflow_handle(handle.id).fetch_history()
    assert missing.value.status == RPCStatusCode.NOT_FOUND
    with pytest.raises(RPCError) as missing:
        await stranger.get_workflow_handle(handle.id).describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND


async def test_an_archived_run_is_described_and_read_in_reverse_after_deletion(archival):
    """After retention deleted a run, DescribeWorkflowExecution (the SDK's describe(), `temporal workflow
    describe`) answers from its archive as it did for the closed run, and the reverse history pages
    through the archive newest first."""
    server, _ = archival
    name, client = await archiving_namespace(server)
    queue = f"arc-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[HelloWorkflow], activities=[greet]):
        handle = await client.start_workflow(
            HelloWorkflow.run,
            "umbrella",
            id=f"order-umbrella-{uuid.uuid4()}",
            task_queue=queue,
            memo={"note": "rush"},
            search_attributes=TypedSearchAttributes([SearchAttributePair(CUSTOMER, "umbrella")]),
        )
        await handle.result()
    before = await handle.describe()
    events = [e async for e in handle.fetch_history_events()]
    await wait_deleted(server, [handle.id])

    after = await client.get_workflow_handle(handle.id, run_id=handle.result_run_id).describe()
    for field in (
        "id",
        "run_id",
        "workflow_type",
        "status",
        "start_time",
        "close_time",
        "execution_time",
        "history_length",
        "task_queue",
        "parent_id",
    ):
        assert getattr(after, field) == getattr(before, field), field
    assert after.history_length == len(events)
    assert await after.memo_value("note") == "rush"
    assert after.typed_search_attributes.get(CUSTOMER) == "umbrella"
    assert (await client.get_workflow_handle(handle.id).describe()).run_id == handle.result_run_id

    described = await temporal(
        "workflow", "describe", "-w", handle.id, "-o", "json", address=server.address, namespace=name
    )
    info = json.loads(described.stdout)["workflowExecutionInfo"]
    assert info["status"] == "WORKFLOW_EXECUTION_STATUS_COMPLETED"
    assert info["taskQueue"] == queue

    reversed_ids: list[int] = []
    token = b""
    while True:
        page = await client.workflow_service.get_workflow_execution_history_reverse(
            GetWorkflowExecutionHistoryReverseRequest(
                namespace=name,
                execution=WorkflowExecution(workflow_id=handle.id, run_id=handle.result_run_id or ""),
                maximum_page_size=4,
                next_page_token=token,
            )
        )
        assert len(page.history.events) <= 4
        reversed_ids += [e.event_id for e in page.history.events]
        token = page.next_page_token
        if not token:
            break
    assert reversed_ids == [e.event_id for e in reversed(events)]
    with pytest.raises(RPCError) as missing:
        await client.get_workflow_handle(f"never-{uuid.uuid4()}").describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND


async def test_erasing_a_subject_makes_its_archived_runs_unreadable_too(archival):
    """A run of a data subject, archived and deleted from the hot store, reads from the archive as written
    until `perdura erase` destroys the subject's key; then its payloads read as the erased marker there
    too, with the history's shape kept, and another subject's archived run reads as before."""
    server, _ = archival
    name, client = await archiving_namespace(server, prefix="erasure")
    subject, other = f"subject-{uuid.uuid4().hex[:8]}", f"other-{uuid.uuid4().hex[:8]}"
    secret = f"SECRET-{uuid.uuid4().hex[:8]}"
    queue = f"arc-{uuid.uuid4()}"
    handles = {}
    async with Worker(client, task_queue=queue, workflows=[HelloWorkflow], activities=[greet]):
        for who in (subject, other):
            handles[who] = await client.start_workflow(
                HelloWorkflow.run,
                f"{secret}-{who}",
                id=f"erase-archived-{who}",
                task_queue=queue,
                search_attributes=TypedSearchAttributes([SearchAttributePair(DATA_SUBJECT, who)]),
            )
            assert await handles[who].result() == f"hello {secret}-{who}"
    await wait_deleted(server, [h.id for h in handles.values()])

    async def payloads(handle: WorkflowHandle) -> tuple[list[tuple[int, int]], set[bytes], bytes]:
        shape, encodings, raw = [], set(), b""
        async for event in handle.fetch_history_events():
            shape.append((event.event_id, event.event_type))
            subject_seal.each_payload(event, lambda p: encodings.add(p.metadata.get("encoding", b"")))
            raw += event.SerializeToString()
        return shape, encodings, raw

    async def events(handle: WorkflowHandle) -> list:
        return [event async for event in handle.fetch_history_events()]

    before = {who: await payloads(h) for who, h in handles.items()}
    other_before = await events(handles[other])
    assert f"{secret}-{subject}".encode() in before[subject][2]  # read from the archive, as written

    out = server.cli("erase", "--namespace", name, "--subject", subject)
    assert "1 key(s) destroyed" in out, out

    shape, encodings, raw = await payloads(handles[subject])
    assert shape == before[subject][0]
    assert encodings == {subject_seal.ERASED}
    assert secret.encode() not in raw
    # Compared as messages, not bytes: protobuf serializes map fields (a payload's metadata) in no fixed order.
    other_after = await events(handles[other])
    assert len(other_after) == len(other_before)
    for was, now in zip(other_before, other_after, strict=True):
        assert now == was, f"event {was.event_id} changed:\n{was}\n---\n{now}"
