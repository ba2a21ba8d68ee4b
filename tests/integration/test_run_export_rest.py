"""The REST run export for people (signed in, through Django's test client on Postgres): an owner exports a
run their namespace holds and the export is audited as theirs; a member with no role on the namespace and
a person of another organisation get 404; without a configured signing key the answer is 503 naming it."""

from __future__ import annotations

import json
import uuid

import pytest
from temporalio.api.common.v1 import WorkflowType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from engine.exports import manifest, signing
from engine.services import workflows
from tenants.models import AuditEvent, Namespace
from tests.integration.test_rest_api import create_namespace, invite_and_join, signup

pytestmark = pytest.mark.django_db


@pytest.fixture
def signing_key(monkeypatch):
    monkeypatch.setenv(signing.ENV_VAR, signing.generate())
    signing.signing_key.cache_clear()
    yield signing.signing_key()
    signing.signing_key.cache_clear()


def _start(namespace_id: str) -> tuple[str, str]:
    namespace = Namespace.objects.get(pk=namespace_id)
    workflow_id = f"wf-{uuid.uuid4()}"
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=workflow_id,
        workflow_type=WorkflowType(name="Order"),
        task_queue=TaskQueue(name="orders"),
        request_id=str(uuid.uuid4()),
    )
    result = workflows.workflow_start(namespace=namespace, request=request)
    return workflow_id, result.run_id


def _path(namespace_id: str, workflow_id: str) -> str:
    return f"/api/v1/namespaces/{namespace_id}/export/run/?workflow_id={workflow_id}"


def test_an_owner_exports_a_run_and_the_export_is_audited_as_theirs(signing_key):
    owner, org = signup()
    ns = create_namespace(owner, "orders")
    workflow_id, run_id = _start(ns["id"])
    r = owner.get(_path(ns["id"], workflow_id))
    assert r.status_code == 200, r.content
    assert r["Content-Type"] == "application/json"
    assert "attachment" in r["Content-Disposition"]
    doc = json.loads(r.content)
    assert doc["run"]["run_id"] == run_id
    assert doc["run"]["status"] == "WORKFLOW_EXECUTION_STATUS_RUNNING"  # a live run: its history so far
    assert [e["eventType"] for e in doc["events"]][:2] == [
        "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED",
        "EVENT_TYPE_WORKFLOW_TASK_SCHEDULED",
    ]
    assert manifest.verify(doc, public_key=signing_key.public_key()).ok
    entry = AuditEvent.objects.filter(action="export.run").latest("id")
    assert entry.target == f"workflow/{workflow_id}/{run_id}"
    assert (entry.actor_kind, entry.actor_label, entry.via, entry.outcome) == (
        "user",
        f"owner@{org}.example",
        "rest",
        "ok",
    )
    assert entry.details["head"] == doc["manifest"]["head"]


def test_people_without_a_role_on_the_namespace_get_404(signing_key):
    owner, org = signup()
    ns = create_namespace(owner, "orders")
    workflow_id, _ = _start(ns["id"])
    member = invite_and_join(owner, f"dev@{org}.example")  # a member with no namespace role
    stranger, _ = signup()
    for person in (member, stranger):
        r = person.get(_path(ns["id"], workflow_id))
        assert r.status_code == 404, r.content
        assert workflow_id.encode() not in r.content
    assert owner.get(_path(ns["id"], f"missing-{uuid.uuid4()}")).status_code == 404
    assert owner.get(f"/api/v1/namespaces/{ns['id']}/export/run/").status_code == 400


def test_without_a_signing_key_the_export_is_refused_with_503(monkeypatch):
    monkeypatch.delenv(signing.ENV_VAR, raising=False)
    monkeypatch.delenv("PERDURA_DEV", raising=False)
    signing.signing_key.cache_clear()
    try:
        owner, _ = signup()
        ns = create_namespace(owner, "orders")
        workflow_id, _ = _start(ns["id"])
        r = owner.get(_path(ns["id"], workflow_id))
    finally:
        signing.signing_key.cache_clear()
    assert r.status_code == 503
    assert signing.ENV_VAR in r.json()["detail"]
    assert not AuditEvent.objects.filter(action="export.run", target__contains=workflow_id).exists()
