"""The audit record (tenants/audit.py, engine/api/audit.py): actor forms, targets, and no payloads or secrets."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from temporalio.api.common.v1 import Payload, Payloads, WorkflowExecution, WorkflowType
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.api.workflowservice.v1 import service_pb2 as workflow_service

from engine.api import audit as audit_calls
from engine.api import methods
from tenants import api_keys, audit
from tenants.auth import ANONYMOUS, Principal

SECRET = b"card 4111 1111 1111 1111"


def _payloads() -> Payloads:
    return Payloads(payloads=[Payload(metadata={"encoding": b"json/plain"}, data=SECRET)])


def test_a_key_is_named_by_its_prefix_and_name_never_its_secret():
    new = api_keys.generate()
    principal = Principal(
        anonymous=False,
        key_id="k",
        key_name="ci deploy",
        prefix=new.prefix,
        organization_id="o",
        role="operator",
    )
    context = audit_calls.context_for(principal, "10.0.0.7")
    assert context.actor == audit.AuditActor(kind="key", id=f"pdk_{new.prefix}", label="ci deploy")
    assert context.source == "10.0.0.7"
    assert context.via == "grpc"
    assert new.plaintext not in repr(context)
    assert new.secret_hash not in repr(context)


def test_the_other_actor_forms():
    assert audit_calls.context_for(ANONYMOUS, "127.0.0.1").actor == audit.AuditActor(
        kind="operator", id="loopback"
    )
    user = SimpleNamespace(pk=42, email="ann@acme.example", password="pbkdf2_sha256$...")
    assert audit.user_actor(user) == audit.AuditActor(kind="user", id="42", label="ann@acme.example")
    assert audit.operator_actor("cli", "root") == audit.AuditActor(kind="operator", id="cli", label="root")
    # Outside any request (e.g. `perdura migrate`) the system acts.
    assert audit.current().actor.kind == "system"


def test_binding_a_context_is_scoped():
    context = audit.AuditContext(actor=audit.operator_actor("cli"), source="host", via="cli")
    with audit.acting(context):
        assert audit.current() is context
    assert audit.current() is audit.SYSTEM_CONTEXT


@pytest.mark.parametrize(
    ("method", "request_message", "target", "details"),
    [
        (
            "StartWorkflowExecution",
            rr.StartWorkflowExecutionRequest(
                namespace="a.acme",
                workflow_id="order-1",
                workflow_type=WorkflowType(name="Checkout"),
                input=_payloads(),
            ),
            "workflow/order-1",
            {"workflow_type": "Checkout"},
        ),
        (
            "SignalWorkflowExecution",
            rr.SignalWorkflowExecutionRequest(
                namespace="a.acme",
                workflow_execution=WorkflowExecution(workflow_id="order-1", run_id="r1"),
                signal_name="pay",
                input=_payloads(),
            ),
            "workflow/order-1/r1",
            {"signal_name": "pay"},
        ),
        (
            "TerminateWorkflowExecution",
            rr.TerminateWorkflowExecutionRequest(
                namespace="a.acme",
                workflow_execution=WorkflowExecution(workflow_id="order-1"),
                reason="leaked card 4111 1111 1111 1111",
                details=_payloads(),
            ),
            "workflow/order-1",
            {},
        ),
        (
            "SignalWithStartWorkflowExecution",
            rr.SignalWithStartWorkflowExecutionRequest(
                namespace="a.acme",
                workflow_id="order-2",
                workflow_type=WorkflowType(name="Checkout"),
                signal_name="pay",
                signal_input=_payloads(),
                input=_payloads(),
            ),
            "workflow/order-2",
            {"workflow_type": "Checkout", "signal_name": "pay"},
        ),
        (
            "ResetWorkflowExecution",
            rr.ResetWorkflowExecutionRequest(
                namespace="a.acme",
                workflow_execution=WorkflowExecution(workflow_id="order-1", run_id="r1"),
                workflow_task_finish_event_id=4,
            ),
            "workflow/order-1/r1",
            {"workflow_task_finish_event_id": 4},
        ),
        (
            "PauseActivity",
            rr.PauseActivityRequest(
                namespace="a.acme", execution=WorkflowExecution(workflow_id="order-1"), id="charge"
            ),
            "workflow/order-1/activity/charge",
            {},
        ),
        (
            "ResetActivity",
            rr.ResetActivityRequest(
                namespace="a.acme", execution=WorkflowExecution(workflow_id="order-1"), type="Charge"
            ),
            "workflow/order-1",
            {"activity_type": "Charge"},
        ),
        (
            "UnpauseActivity",
            rr.UnpauseActivityRequest(
                namespace="a.acme", execution=WorkflowExecution(workflow_id="order-1"), unpause_all=True
            ),
            "workflow/order-1",
            {"all_activities": True},
        ),
        (
            "PauseActivityExecution",
            rr.PauseActivityExecutionRequest(
                namespace="a.acme",
                workflow_id="order-1",
                run_id="r1",
                activity_id="charge",
                reason="card 4111",
            ),
            "workflow/order-1/r1/activity/charge",
            {},
        ),
        (
            "PauseWorkflowExecution",
            rr.PauseWorkflowExecutionRequest(namespace="a.acme", workflow_id="order-1", run_id="r1"),
            "workflow/order-1/r1",
            {},
        ),
    ],
)
def test_targets_and_details_carry_ids_and_names_never_payloads(method, request_message, target, details):
    assert audit_calls.target_of(method, request_message) == target
    assert audit_calls.details_of(method, request_message) == details
    shown = repr(
        (audit_calls.target_of(method, request_message), audit_calls.details_of(method, request_message))
    )
    assert "4111" not in shown


def test_operator_actions_are_audited_and_worker_calls_are_not():
    table = methods.WORKFLOW_METHODS
    for name in [
        "StartWorkflowExecution",
        "SignalWithStartWorkflowExecution",
        "SignalWorkflowExecution",
        "RequestCancelWorkflowExecution",
        "TerminateWorkflowExecution",
        "ResetWorkflowExecution",
        "UpdateWorkflowExecution",
        "DeleteWorkflowExecution",
        "ExecuteMultiOperation",
        "CreateSchedule",
        "DeleteSchedule",
    ]:
        assert table[name].audit is methods.Audit.CALL, name
    for name in ["RegisterNamespace", "UpdateNamespace", "DeprecateNamespace"]:
        assert table[name].audit is methods.Audit.CHANGE, name
    assert methods.OPERATOR_METHODS["DeleteNamespace"].audit is methods.Audit.CHANGE
    assert methods.OPERATOR_METHODS["DeleteNamespace"].access is methods.Access.ADMIN
    service = workflow_service.DESCRIPTOR.services_by_name["WorkflowService"]
    for method in service.methods:
        if method.name.startswith(("Poll", "Respond", "Record")) or method.name in (
            "ResetStickyTaskQueue",
            "ShutdownWorker",
        ):
            assert table[method.name].audit is methods.Audit.NONE, method.name
        if table[method.name].access is methods.Access.READ:
            assert table[method.name].audit is methods.Audit.NONE, method.name


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("2026-01-31T12:00:00Z", "2026-01-31T12:00:00+00:00"),
        ("2026-01-31T13:00:00+01:00", "2026-01-31T13:00:00+01:00"),
        ("2026-01-31", "2026-01-31T00:00:00+00:00"),
    ],
)
def test_times_of_a_range(text, iso):
    assert audit.parse_time(text).isoformat() == iso


def test_relative_times_and_bad_ones():
    from perdura import clock

    before = clock.now()
    assert 86390 < (before - audit.parse_time("24h")).total_seconds() < 86410
    with pytest.raises(ValueError, match="not a time"):
        audit.parse_time("yesterday")
