"""Erasure by key destruction on real Postgres: a subject's payloads are sealed under its own key in the
history and the visibility memo, read back as they were, and after `subject_erase` the key row holds no
key, every payload of the subject's runs reads as the erased marker, its running run is terminated, the
erasure is audited, and another subject's run (and a run without a subject) reads as before."""

from __future__ import annotations

import json
import uuid

import pytest
from temporalio.api.common.v1 import Memo, Payload, Payloads, SearchAttributes, WorkflowType
from temporalio.api.enums.v1 import EventType, WorkflowExecutionStatus
from temporalio.api.history.v1 import WorkflowExecutionStartedEventAttributes
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from engine.exports import erasure
from engine.models import Execution, HistoryBatch
from engine.persistence import encryption, store, subject_seal
from engine.persistence import visibility as visibility_store
from engine.services import workflows
from tenants import audit
from tenants.models import AuditEvent, Namespace, SubjectKey
from tenants.services.namespaces import namespace_register
from visibility.models import VisibilityRecord

pytestmark = pytest.mark.django_db(transaction=True)


def _payloads(text: str) -> Payloads:
    return Payloads(payloads=[Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(text).encode())])


def _start(namespace: Namespace, secret: str, subject: str | None) -> Execution:
    attributes = SearchAttributes()
    if subject is not None:
        attributes.indexed_fields["PerduraDataSubject"].CopyFrom(
            Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(subject).encode())
        )
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=f"wf-{uuid.uuid4()}",
        workflow_type=WorkflowType(name="T"),
        task_queue=TaskQueue(name="tq"),
        input=_payloads(secret),
        memo=Memo(
            fields={
                "note": Payload(metadata={"encoding": b"json/plain"}, data=b'"memo-' + secret.encode() + b'"')
            }
        ),
        search_attributes=attributes if subject is not None else None,
    )
    result = workflows.workflow_start(namespace=namespace, request=request)
    execution = Execution.objects.get(namespace=namespace, run_id=result.run_id)
    workflows.workflow_signal(
        namespace=namespace,
        workflow_id=execution.workflow_id,
        run_id=execution.run_id,
        signal_name="s",
        input=_payloads(secret + "-signal"),
        identity="test",
        request_id=str(uuid.uuid4()),
        header=None,
    )
    return Execution.objects.get(pk=execution.pk)


def _payload_datas(execution: Execution) -> list[bytes]:
    found: list[bytes] = []
    for event in store.history_events(Execution.objects.get(pk=execution.pk)):
        subject_seal.each_payload(event, lambda p: found.append(p.metadata.get("encoding", b"")))
    return found


def _texts(execution: Execution) -> str:
    return "".join(
        e.SerializeToString().decode("latin-1")
        for e in store.history_events(Execution.objects.get(pk=execution.pk))
    )


def _raw_batches(execution: Execution) -> list[bytes]:
    return [
        encryption.unseal(
            execution.namespace_id,
            bytes(b.data),
            encryption.history_aad(execution.namespace_id, execution.run_id, b.first_event_id),
        )
        for b in HistoryBatch.objects.filter(execution=execution)
    ]


def _memo(execution: Execution) -> Memo:
    record = VisibilityRecord.objects.get(execution_id=execution.pk)
    return Memo.FromString(
        visibility_store.memo_open(execution.namespace_id, execution.run_id, bytes(record.memo))
    )


@pytest.fixture
def namespace() -> Namespace:
    return namespace_register(name=f"erase-{uuid.uuid4().hex[:8]}")


def test_a_subjects_payloads_are_sealed_under_its_key_and_read_back(namespace):
    alice = _start(namespace, "alice-secret", "alice")
    plain = _start(namespace, "nobody-secret", None)
    # Inside the namespace-sealed batch, the subject's payloads are sealed again; a run without one is not.
    assert all(raw.startswith(subject_seal.MARK) for raw in _raw_batches(alice))
    assert not any(b"alice-secret" in raw for raw in _raw_batches(alice))
    assert not any(raw.startswith(subject_seal.MARK) for raw in _raw_batches(plain))
    assert any(b"nobody-secret" in raw for raw in _raw_batches(plain))
    # Reads open them: the history is what the client sent.
    assert "alice-secret-signal" in _texts(alice)
    assert set(_payload_datas(alice)) == {b"json/plain"}
    assert _memo(alice).fields["note"].data == b'"memo-alice-secret"'
    state = store.decode_state(Execution.objects.get(pk=alice.pk))
    assert b"alice-secret" in state.start_attrs
    assert b"alice-secret" not in bytes(
        encryption.unseal(
            namespace.id,
            Execution.objects.get(pk=alice.pk).state,
            encryption.state_aad(namespace.id, alice.run_id),
        )
    )
    # The search attribute stays plaintext (it is indexed), and one key serves the subject's runs.
    _start(namespace, "alice-2", "alice")
    assert SubjectKey.objects.filter(namespace=namespace, subject="alice").count() == 1
    # A subject as long as a search attribute value may be gets its key too.
    long = _start(namespace, "long-secret", "ü" * 600)
    assert "long-secret-signal" in _texts(long)
    assert not any(b"long-secret" in raw for raw in _raw_batches(long))


def test_erasure_destroys_the_key_and_leaves_the_historys_shape(namespace):
    closed = _start(namespace, "alice-closed", "alice")
    workflows.workflow_terminate(
        namespace=namespace,
        workflow_id=closed.workflow_id,
        run_id=closed.run_id,
        reason="done",
        details=None,
        identity="test",
    )
    running = _start(namespace, "alice-running", "alice")
    bob = _start(namespace, "bob-secret", "bob")
    shape_before = [
        (e.event_id, e.event_type) for e in store.history_events(Execution.objects.get(pk=closed.pk))
    ]
    key = SubjectKey.objects.get(namespace=namespace, subject="alice")

    with audit.acting(audit.AuditContext(actor=audit.operator_actor("cli", "dpo"), via="cli")):
        done = erasure.subject_erase(namespace=namespace, subject="alice")

    assert done.key_ids == [str(key.id)]
    assert done.terminated == [(running.workflow_id, running.run_id)]
    row = SubjectKey.objects.get(pk=key.pk)
    assert bytes(row.wrapped_key) == b""
    assert row.erased_at is not None
    # No live key of alice is left: the termination made none.
    assert not SubjectKey.objects.filter(
        namespace=namespace, subject="alice", erased_at__isnull=True
    ).exists()
    for execution in (closed, running):
        assert set(_payload_datas(execution)) == {subject_seal.ERASED}
        assert "alice-" not in _texts(execution)
        assert set(_memo(execution).fields["note"].metadata.values()) >= {subject_seal.ERASED}
        # The run's state too: the start's input and memo a retry or an export would read.
        state = store.decode_state(Execution.objects.get(pk=execution.pk))
        started = WorkflowExecutionStartedEventAttributes.FromString(state.start_attrs)
        assert started.input.payloads[0].metadata["encoding"] == subject_seal.ERASED
        assert Memo.FromString(state.memo).fields["note"].metadata["encoding"] == subject_seal.ERASED
    shape_after = [
        (e.event_id, e.event_type) for e in store.history_events(Execution.objects.get(pk=closed.pk))
    ]
    assert shape_after == shape_before
    last = list(store.history_events(Execution.objects.get(pk=running.pk)))[-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED
    assert last.workflow_execution_terminated_event_attributes.reason == erasure.REASON
    assert (
        Execution.objects.get(pk=running.pk).status
        == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TERMINATED
    )
    # Bob's run is untouched.
    assert "bob-secret-signal" in _texts(bob)
    assert set(_payload_datas(bob)) == {b"json/plain"}
    entry = AuditEvent.objects.get(namespace_id=namespace.id, action="subject.erase")
    assert (entry.actor_kind, entry.actor_label, entry.via, entry.target, entry.outcome) == (
        "operator",
        "dpo",
        "cli",
        "subject/alice",
        "ok",
    )
    assert entry.details == {
        "destroyed_keys": [str(key.id)],
        "terminated_runs": [f"workflow/{running.workflow_id}/{running.run_id}"],
    }
    # Erasing again destroys nothing more; a new run of the subject gets a new key.
    assert erasure.subject_erase(namespace=namespace, subject="alice").key_ids == []
    again = _start(namespace, "alice-new", "alice")
    assert "alice-new-signal" in _texts(again)
    assert (
        SubjectKey.objects.filter(namespace=namespace, subject="alice", erased_at__isnull=True).count() == 1
    )
