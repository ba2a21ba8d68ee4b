"""Archival before retention deletion, on real Postgres and a real S3 protocol server (moto's server mode, or
Ceph's radosgw with PERDURA_TEST_S3=radosgw):
the ARCHIVE step writes the run's history, reads it back and compares its checksum before any deletion
step; a store that is down fails the step and nothing is deleted until it is back; the object is sealed
(nothing of a payload readable in the bucket), and a data subject's payloads stay sealed under its key,
so erasing the subject erases them from the archive too."""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Iterator
from datetime import timedelta

import boto3
import pytest
from temporalio.api.common.v1 import Payload, Payloads, SearchAttributes, WorkflowType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from engine.archival import history as archival_history
from engine.archival import layout, s3
from engine.exports import erasure
from engine.history.retention import Step
from engine.models import Execution, HistoryArchive, HistoryBatch, Retention
from engine.persistence import leases, store, subject_seal
from engine.services import reads, workflows
from engine.shards import parking, retention
from engine.shards.failure_log import FailureLog
from tenants import audit
from tenants.models import Namespace
from tenants.services.namespaces import (
    ArchivalRequest,
    namespace_register,
    namespace_set_archival,
    namespace_set_retention,
)
from tests.integration.test_retention import make_due, remaining_rows
from tests.support.s3 import Radosgw, s3_store

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

BUCKET = "perdura-archive"


@pytest.fixture(scope="module")
def store_server(request: pytest.FixtureRequest) -> Iterator:
    with s3_store(request) as running:
        running.ensure_bucket(BUCKET)
        yield running


@pytest.fixture(autouse=True)
def s3_env(store_server, monkeypatch):
    for name, value in store_server.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(s3, "_client", None)
    yield
    s3._client = None


@pytest.fixture(autouse=True)
def three_attempts(settings):
    settings.PERDURA_SHARD_MAX_ATTEMPTS = 3


def archiving_namespace(prefix: str = "runs") -> Namespace:
    namespace = namespace_register(name=f"arc-{uuid.uuid4().hex[:8]}")
    namespace = namespace_set_retention(namespace=namespace, retention=timedelta(seconds=60))
    return namespace_set_archival(
        namespace=namespace,
        request=ArchivalRequest(history_state=2, history_uri=f"s3://{BUCKET}/{prefix}"),
    )


def _payloads(text: str) -> Payloads:
    return Payloads(payloads=[Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(text).encode())])


def closed_run(namespace: Namespace, secret: str = "s3cret", subject: str | None = None) -> Execution:
    attributes = SearchAttributes()
    if subject is not None:
        attributes.indexed_fields["PerduraDataSubject"].CopyFrom(
            Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(subject).encode())
        )
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=f"wf/{uuid.uuid4()} with spaces",
        workflow_type=WorkflowType(name="T"),
        task_queue=TaskQueue(name="tq"),
        input=_payloads(secret),
        search_attributes=attributes if subject is not None else None,
    )
    result = workflows.workflow_start(namespace=namespace, request=request)
    workflows.workflow_signal(
        namespace=namespace,
        workflow_id=request.workflow_id,
        run_id=result.run_id,
        signal_name="s",
        input=_payloads(secret + "-signal"),
        identity="test",
        request_id=str(uuid.uuid4()),
        header=None,
    )
    workflows.workflow_terminate(
        namespace=namespace,
        workflow_id=request.workflow_id,
        run_id=result.run_id,
        reason="done",
        details=None,
        identity="test",
    )
    return Execution.objects.get(namespace=namespace, run_id=result.run_id)


def process(run: Execution) -> int:
    lease = leases.acquire(run.shard, "archiver")
    assert lease is not None
    return retention.process(run.shard, lease)


def test_the_history_is_archived_verified_and_recorded_before_the_run_is_deleted(store_server):
    namespace = archiving_namespace()
    run = closed_run(namespace)
    events = list(store.history_events(run))
    make_due(run)

    assert process(run) == 1

    assert remaining_rows(run) == {}
    record = HistoryArchive.objects.get(namespace=namespace, workflow_id=run.workflow_id, run_id=run.run_id)
    digest = hashlib.sha256(run.workflow_id.encode()).hexdigest()[:32]
    assert record.key == f"runs/{namespace.id}/history/{digest}/{run.run_id}.history"
    assert (record.bucket, record.uri, record.events) == (BUCKET, f"s3://{BUCKET}/runs", len(events))
    data = store_server.client().get_object(Bucket=BUCKET, Key=record.key)["Body"].read()
    assert (hashlib.sha256(data).hexdigest(), len(data)) == (record.sha256, record.size_bytes)
    assert b"s3cret" not in data  # sealed: the bucket alone reads nothing of a payload
    header, _, _ = layout.split(data)
    assert header["run_id"] == run.run_id
    assert header["data_key_version"] == record.data_key_version == 1
    assert header["subject_key_ids"] == []
    assert archival_history.read(record) == events
    # What GetWorkflowExecutionHistory answers for the deleted run: by run id, or the workflow's newest.
    assert reads.archived_history(
        namespace_id=namespace.id, workflow_id=run.workflow_id, run_id=run.run_id
    ) == (run.run_id, events)
    assert reads.archived_history(namespace_id=namespace.id, workflow_id=run.workflow_id, run_id="") == (
        run.run_id,
        events,
    )
    assert reads.archived_history(namespace_id=namespace.id, workflow_id="nobody", run_id="") is None


def test_a_namespace_that_does_not_archive_deletes_without_writing():
    namespace = namespace_register(name=f"plain-{uuid.uuid4().hex[:8]}")
    run = closed_run(namespace)
    make_due(run)
    assert process(run) == 1
    assert remaining_rows(run) == {}
    assert not HistoryArchive.objects.filter(namespace=namespace).exists()


def test_a_store_that_is_down_fails_the_step_and_nothing_is_deleted_until_it_is_back(
    store_server, monkeypatch
):
    from tests.support import servers

    namespace = archiving_namespace()
    run = closed_run(namespace)
    row = make_due(run)
    batches = HistoryBatch.objects.filter(execution_id=run.pk).count()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{servers.free_port()}")  # nobody there
    monkeypatch.setattr(s3, "_client", None)

    assert process(run) == 0
    row.refresh_from_db()
    assert (row.failures, row.step, row.parked_at) == (1, Step.ARCHIVE, None)
    assert "StoreError" in row.last_error
    assert HistoryBatch.objects.filter(execution_id=run.pk).count() == batches
    assert Execution.objects.filter(pk=run.pk).exists()
    assert not HistoryArchive.objects.filter(namespace=namespace).exists()

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", store_server.endpoint)  # back
    monkeypatch.setattr(s3, "_client", None)
    make_due(run)
    assert process(run) == 1
    assert remaining_rows(run) == {}
    assert HistoryArchive.objects.filter(namespace=namespace, run_id=run.run_id).exists()


def test_an_archive_that_reads_back_otherwise_fails_the_step(monkeypatch):
    namespace = archiving_namespace()
    run = closed_run(namespace)
    row = make_due(run)
    monkeypatch.setattr(s3, "get", lambda bucket, key: b"something else")
    assert process(run) == 0
    row.refresh_from_db()
    assert (row.failures, row.step) == (1, Step.ARCHIVE)
    assert "ArchiveCheckFailed" in row.last_error
    assert Execution.objects.filter(pk=run.pk).exists()


def test_a_new_uri_leaves_earlier_archives_readable_where_they_went():
    namespace = archiving_namespace("first")
    before = closed_run(namespace)
    make_due(before)
    assert process(before) == 1
    namespace_set_archival(
        namespace=namespace, request=ArchivalRequest(history_uri=f"s3://{BUCKET}/second/p")
    )
    after = closed_run(namespace)
    make_due(after)
    assert process(after) == 1

    first = HistoryArchive.objects.get(namespace=namespace, run_id=before.run_id)
    second = HistoryArchive.objects.get(namespace=namespace, run_id=after.run_id)
    assert first.key.startswith("first/")
    assert second.key.startswith("second/p/")
    assert len(archival_history.read(first)) == first.events
    assert len(archival_history.read(second)) == second.events


def test_a_subjects_payloads_stay_sealed_in_the_archive_and_erasure_erases_them(store_server):
    namespace = archiving_namespace()
    run = closed_run(namespace, secret="alice-secret", subject="alice")
    make_due(run)
    assert process(run) == 1
    record = HistoryArchive.objects.get(namespace=namespace, run_id=run.run_id)
    data = store_server.client().get_object(Bucket=BUCKET, Key=record.key)["Body"].read()
    header, _, _ = layout.split(data)
    assert len(header["subject_key_ids"]) == 1
    inputs = [
        e for e in archival_history.read(record) if e.HasField("workflow_execution_started_event_attributes")
    ]
    assert b"alice-secret" in inputs[0].workflow_execution_started_event_attributes.input.payloads[0].data

    with audit.acting(audit.AuditContext(actor=audit.operator_actor("cli", "dpo"), via="cli")):
        erasure.subject_erase(namespace=namespace, subject="alice")

    erased = archival_history.read(record)
    assert len(erased) == record.events  # the shape stays
    started = erased[0].workflow_execution_started_event_attributes
    assert started.input.payloads[0].metadata["encoding"] == subject_seal.ERASED
    assert all(b"alice-secret" not in e.SerializeToString() for e in erased)


def test_a_row_mid_deletion_resumes_without_archiving():
    """A row that was past ARCHIVE (or stored mid-deletion before archival existed) never archives a
    half-deleted run: it goes on deleting."""
    namespace = archiving_namespace()
    run = closed_run(namespace)
    row = make_due(run)
    Retention.objects.filter(pk=row.pk).update(step=Step.VISIBILITY)
    assert process(run) == 1
    assert remaining_rows(run) == {}
    assert not HistoryArchive.objects.filter(namespace=namespace).exists()


def _with_customer(namespace: Namespace, customer: str) -> Execution:
    attributes = SearchAttributes()
    attributes.indexed_fields["CustomerId"].CopyFrom(
        Payload(metadata={"encoding": b"json/plain", "type": b"Keyword"}, data=json.dumps(customer).encode())
    )
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=f"order-{uuid.uuid4()}",
        workflow_type=WorkflowType(name="Order"),
        task_queue=TaskQueue(name="tq"),
        search_attributes=attributes,
    )
    result = workflows.workflow_start(namespace=namespace, request=request)
    workflows.workflow_terminate(
        namespace=namespace,
        workflow_id=request.workflow_id,
        run_id=result.run_id,
        reason="done",
        details=None,
        identity="test",
    )
    return Execution.objects.get(namespace=namespace, run_id=result.run_id)


def test_the_archive_index_keeps_closed_runs_listable_by_any_filter_after_deletion():
    from temporalio.api.enums.v1 import IndexedValueType

    from visibility import selectors
    from visibility.services import search_attributes_add

    namespace = namespace_register(name=f"vis-{uuid.uuid4().hex[:8]}")
    search_attributes_add(
        namespace=namespace, attributes={"CustomerId": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD}
    )
    before = _with_customer(namespace, "acme")  # closed while visibility archival was off: not archived
    namespace_set_archival(
        namespace=namespace,
        request=ArchivalRequest(visibility_state=2, visibility_uri=f"s3://{BUCKET}/visibility"),
    )
    acme = _with_customer(namespace, "acme")
    globex = _with_customer(namespace, "globex")

    def listed(query: str) -> list[str]:
        found, token = selectors.archived_execution_list(
            namespace_id=namespace.id, query=query, page_size=1, page_token=b""
        )
        while token:
            more, token = selectors.archived_execution_list(
                namespace_id=namespace.id, query=query, page_size=1, page_token=token
            )
            found += more
        return [r.run_id for r in found]

    # Archived at close, before any retention.
    assert listed("CustomerId = 'acme'") == [acme.run_id]
    assert listed("") == [globex.run_id, acme.run_id]
    for run in (before, acme, globex):
        make_due(run)
        assert process(run) == 1
        assert remaining_rows(run) == {}
    assert listed("CustomerId = 'acme' AND WorkflowType = 'Order' AND ExecutionStatus = 'Terminated'") == [
        acme.run_id
    ]
    assert listed("NOT (CustomerId = 'acme') ORDER BY StartTime ASC") == [globex.run_id]
    assert listed(f"WorkflowId = '{globex.workflow_id}' OR CustomerId STARTS_WITH 'ac'") == [
        globex.run_id,
        acme.run_id,
    ]
    # Another namespace sees none of them.
    other = namespace_register(name=f"other-{uuid.uuid4().hex[:8]}")
    found, _ = selectors.archived_execution_list(
        namespace_id=other.id, query="", page_size=10, page_token=b""
    )
    assert found == []


def test_an_archived_run_is_described_from_its_archive_as_it_was_before_deletion():
    """DescribeWorkflowExecution of a deleted-but-archived run answers what it answered for the closed run
    while its rows were there (status, times, type, task queue, memo, search attributes, history length),
    and a run with no archive stays NotFound (None here)."""
    from temporalio.api.common.v1 import Memo
    from temporalio.api.enums.v1 import IndexedValueType, WorkflowExecutionStatus

    from engine.services import run_descriptions
    from visibility.services import search_attributes_add

    namespace = archiving_namespace()
    search_attributes_add(
        namespace=namespace, attributes={"CustomerId": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD}
    )
    attributes = SearchAttributes()
    attributes.indexed_fields["CustomerId"].CopyFrom(
        Payload(metadata={"encoding": b"json/plain", "type": b"Keyword"}, data=b'"acme"')
    )
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=f"order-{uuid.uuid4()}",
        workflow_type=WorkflowType(name="Order"),
        task_queue=TaskQueue(name="orders"),
        search_attributes=attributes,
        memo=Memo(fields={"note": Payload(metadata={"encoding": b"json/plain"}, data=b'"rush"')}),
    )
    request.workflow_run_timeout.FromSeconds(3600)
    result = workflows.workflow_start(namespace=namespace, request=request)
    workflows.workflow_terminate(
        namespace=namespace,
        workflow_id=request.workflow_id,
        run_id=result.run_id,
        reason="done",
        details=None,
        identity="test",
    )
    run = Execution.objects.get(namespace=namespace, run_id=result.run_id)
    live = run_descriptions.describe_execution(
        reads.run_snapshot(namespace_id=namespace.id, workflow_id=run.workflow_id, run_id=run.run_id)
    )
    make_due(run)
    assert process(run) == 1
    assert remaining_rows(run) == {}

    described = reads.archived_description(
        namespace_id=namespace.id, workflow_id=run.workflow_id, run_id=run.run_id
    )
    assert described is not None
    info, was = described.workflow_execution_info, live.workflow_execution_info
    assert info.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TERMINATED
    for field in (
        "execution",
        "type",
        "start_time",
        "close_time",
        "execution_time",
        "execution_duration",
        "status",
        "history_length",
        "task_queue",
        "first_run_id",
        "memo",
        "search_attributes",
        "root_execution",
    ):
        assert getattr(info, field) == getattr(was, field), field
    assert info.history_length == 3  # started, workflow task scheduled, terminated
    assert info.search_attributes.indexed_fields["CustomerId"].data == b'"acme"'
    assert info.memo.fields["note"].data == b'"rush"'
    assert described.execution_config.task_queue.name == "orders"
    assert described.execution_config.workflow_run_timeout.seconds == 3600
    assert not described.pending_activities
    assert not described.HasField("pending_workflow_task")
    # Without a run id: the workflow id's newest archived run; an unknown workflow: no archive.
    latest = reads.archived_description(namespace_id=namespace.id, workflow_id=run.workflow_id, run_id="")
    assert latest == described
    assert reads.archived_description(namespace_id=namespace.id, workflow_id="nobody", run_id="") is None
    other = archiving_namespace()
    assert (
        reads.archived_description(namespace_id=other.id, workflow_id=run.workflow_id, run_id=run.run_id)
        is None
    )


@pytest.fixture
def export_key(monkeypatch):
    from engine.exports import signing

    monkeypatch.setenv(signing.ENV_VAR, signing.generate())
    signing.signing_key.cache_clear()
    yield
    signing.signing_key.cache_clear()


def test_an_archived_run_is_exported_from_its_archive_as_it_was_before_deletion(export_key):
    """`perdura export run` (gather.build) of a deleted-but-archived run writes the document it wrote for
    the closed run: the same events (a data subject's payloads still sealed), run section and audit
    entries, marked archived and signed so that it verifies offline; a run with no archive stays NotFound."""
    from engine.errors import NotFound
    from engine.exports import gather, manifest

    namespace = archiving_namespace()
    run = closed_run(namespace, secret="exported", subject="alice")
    live = gather.build(namespace=namespace, workflow_id=run.workflow_id, run_id=run.run_id)
    make_due(run)
    assert process(run) == 1
    assert remaining_rows(run) == {}

    archived = gather.build(namespace=namespace, workflow_id=run.workflow_id, run_id=run.run_id)
    document = archived.document
    assert document["events"] == live.document["events"]
    assert b"exported" not in json.dumps(document["events"]).encode()  # the subject's payloads sealed
    assert document["run"] == live.document["run"] | {"archived": True}
    assert document["audit"] == live.document["audit"]
    assert document["links"] == live.document["links"]
    assert (archived.events, archived.run_id) == (live.events, run.run_id)
    assert manifest.verify(json.loads(json.dumps(document))).ok
    tampered = json.loads(json.dumps(document))
    tampered["run"]["status"] = "WORKFLOW_EXECUTION_STATUS_COMPLETED"
    assert not manifest.verify(tampered).ok
    # Without a run id: the newest archived run of the workflow id.
    assert gather.build(namespace=namespace, workflow_id=run.workflow_id).run_id == run.run_id
    with pytest.raises(NotFound):
        gather.build(namespace=namespace, workflow_id="nobody")
    with pytest.raises(NotFound):
        gather.build(namespace=archiving_namespace(), workflow_id=run.workflow_id, run_id=run.run_id)


def forget_credentials(monkeypatch) -> None:
    """The archive client made anew from the environment: boto3's default session keeps the credentials
    it first read (a process reads them once; the tests change them)."""
    monkeypatch.setattr(s3, "_client", None)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)


@pytest.fixture
def archiver_with_a_wrong_secret(store_server, s3_env, monkeypatch) -> Iterator[str]:
    """Archival signs with a known access key and a wrong secret key. radosgw always checks SigV4
    signatures; moto checks them only with its IAM authentication on (off by default, process-wide), so
    on moto it is on for this test, with an IAM user whose key may use S3. Yields the right secret, to
    put back."""
    if isinstance(store_server, Radosgw):
        access_key, secret = store_server.access_key, store_server.secret_key
    else:
        from moto.core.authorization import enable_iam_authentication

        iam = boto3.client(
            "iam",
            endpoint_url=store_server.endpoint,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            region_name="us-east-1",
        )
        user = f"archiver-{uuid.uuid4().hex[:8]}"
        iam.create_user(UserName=user)
        iam.put_user_policy(
            UserName=user,
            PolicyName="archive",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
                }
            ),
        )
        key = iam.create_access_key(UserName=user)["AccessKey"]
        access_key, secret = key["AccessKeyId"], key["SecretAccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", f"not-{secret}")
    forget_credentials(monkeypatch)
    # A fresh failure log: an earlier test's StoreError of the same step must not rate-limit this one's.
    monkeypatch.setattr(parking, "failure_log", FailureLog(parking.log))
    if isinstance(store_server, Radosgw):
        yield secret
    else:
        with enable_iam_authentication():
            yield secret


def test_a_wrong_secret_is_refused_logged_and_retried_then_parked_and_nothing_is_deleted(
    archiver_with_a_wrong_secret, monkeypatch, caplog
):
    """A store that refuses the signature (a wrong AWS_SECRET_ACCESS_KEY) fails the ARCHIVE step with the
    store's own reason, in the row and in the log; the row backs off, then parks, and the run keeps every
    row. With the right secret and the row redriven, it is archived and deleted."""
    right_secret = archiver_with_a_wrong_secret
    namespace = archiving_namespace()
    run = closed_run(namespace)
    row = make_due(run)
    batches = HistoryBatch.objects.filter(execution_id=run.pk).count()

    with caplog.at_level(logging.ERROR, logger="perdura.shards"):
        for attempt in (1, 2, 3):
            assert process(run) == 0
            row.refresh_from_db()
            assert (row.failures, row.step) == (attempt, Step.ARCHIVE)
            assert "StoreError" in row.last_error
            assert "SignatureDoesNotMatch" in row.last_error, row.last_error
            if attempt < 3:
                assert row.parked_at is None
                make_due(run)
    assert row.parked_at is not None  # three attempts (three_attempts): parked for the operator
    logged = [r.getMessage() + "\n" + str(r.exc_info[1] if r.exc_info else "") for r in caplog.records]
    assert any(
        f"{parking.RETENTION} row {row.pk} (RETENTION_ARCHIVE)" in text
        and "attempt 1 of 3" in text
        and "SignatureDoesNotMatch" in text
        and f"s3://{BUCKET}/" in text
        for text in logged
    ), logged
    assert any(
        f"{parking.RETENTION} row {row.pk} (RETENTION_ARCHIVE)" in t and "parked after 3" in t for t in logged
    ), logged
    assert HistoryBatch.objects.filter(execution_id=run.pk).count() == batches
    assert Execution.objects.filter(pk=run.pk).exists()
    assert not HistoryArchive.objects.filter(namespace=namespace).exists()

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", right_secret)
    forget_credentials(monkeypatch)
    assert parking.parked_redrive(ids=[f"{parking.RETENTION}:{row.pk}"]) == 1
    assert process(run) == 1
    assert remaining_rows(run) == {}
    assert HistoryArchive.objects.filter(namespace=namespace, run_id=run.run_id).exists()


def test_a_run_whose_archive_fails_is_charged_alone_and_the_rest_of_its_group_go():
    """Runs of one shard archived together: the one whose bucket is missing backs off, nothing of it is
    deleted, and the others are archived and deleted."""
    namespace = archiving_namespace()
    lost = namespace_set_archival(
        namespace=archiving_namespace(),
        request=ArchivalRequest(history_state=2, history_uri="s3://no-such-bucket-here/runs"),
    )
    runs = [closed_run(namespace) for _ in range(4)]
    failing = closed_run(lost)
    everyone = [*runs, failing]
    ids = [r.pk for r in everyone]
    Execution.objects.filter(pk__in=ids).update(shard=runs[0].shard)
    Retention.objects.filter(execution_id__in=ids).update(shard=runs[0].shard)
    for run in everyone:
        run.shard = runs[0].shard
        make_due(run)

    assert process(runs[0]) == 4

    row = Retention.objects.get(execution_id=failing.pk)
    assert (row.failures, row.step, row.parked_at) == (1, Step.ARCHIVE, None)
    assert "StoreError" in row.last_error
    assert HistoryBatch.objects.filter(execution_id=failing.pk).exists()
    assert not HistoryArchive.objects.filter(run_id=failing.run_id).exists()
    for run in runs:
        assert remaining_rows(run) == {}
        record = HistoryArchive.objects.get(namespace=namespace, run_id=run.run_id)
        assert archival_history.read(record)[0].event_id == 1
