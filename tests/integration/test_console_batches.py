"""The console's batch operations for signed-in people (Django's test client with CSRF checks, on
Postgres): an operator starts a batch from a filter after seeing how many runs match, with a reason and
a confirmation, and stops one, each audited under the RPC's name with the person via the console; a
reader sees the pages without buttons and a forged POST of theirs answers 403 (logged as denied);
another organisation gets 404."""

from __future__ import annotations

import pytest
from temporalio.api.enums.v1 import BatchOperationState, ResetReapplyExcludeType

from engine.models import BatchOperation, BatchTarget
from engine.services import batches
from tenants.models import AuditEvent
from tests.integration.test_console_schedules_export import (  # noqa: F401 (fixtures)
    CSRF,
    _fresh_throttles,
    _post,
    tenants,
)
from tests.integration.test_run_export_rest import _start

pytestmark = pytest.mark.django_db


def test_operators_start_and_stop_batches_readers_are_refused(tenants):  # noqa: F811
    owner, reader, stranger, org, namespace = tenants
    started = [_start(str(namespace.id)) for _ in range(3)]
    query = "TaskQueue = 'orders'"
    base = f"/namespaces/{namespace.name}/batch-operations"

    listed = owner.client.get(f"/namespaces/{namespace.name}/workflows", {"query": query})
    assert 'id="batch-from-query"' in listed.content.decode()
    form = owner.client.get(f"{base}/new", {"query": query})
    html = form.content.decode()
    assert "<strong>3</strong> runs match now" in html
    token = CSRF.search(html).group(1)

    # A reader: the list shows no batch button, the form no form, and a forged start is refused.
    assert (
        'id="batch-from-query"'
        not in reader.client.get(f"/namespaces/{namespace.name}/workflows", {"query": query}).content.decode()
    )
    seen = reader.client.get(f"{base}/new", {"query": query}).content.decode()
    assert "Start batch" not in seen
    reader_token = CSRF.search(seen).group(1)  # the sign-out form's
    fields = {"query": query, "operation": "terminate", "reason": "mine", "confirm": "yes"}
    assert _post(reader, f"{base}/new", fields, reader_token).status_code == 403
    assert not BatchOperation.objects.filter(namespace=namespace).exists()
    denied = AuditEvent.objects.filter(action="StartBatchOperation").latest("id")
    assert (denied.actor_label, denied.via, denied.outcome, denied.code) == (
        f"reader@{org}.example",
        "console",
        "denied",
        "PERMISSION_DENIED",
    )
    assert stranger.client.get(base).status_code == 404
    assert stranger.client.get(f"{base}/new", {"query": query}).status_code == 404

    # No CSRF token, no reason, no confirmation: nothing starts.
    assert _post(owner, f"{base}/new", fields, None).status_code == 403
    assert _post(owner, f"{base}/new", fields | {"reason": " "}, token).status_code == 400
    unconfirmed = _post(owner, f"{base}/new", fields | {"confirm": ""}, token)
    assert unconfirmed.status_code == 400
    assert "Confirm" in unconfirmed.content.decode()
    assert not BatchOperation.objects.filter(namespace=namespace).exists()

    # No shard worker runs in this test: the batch stays running, to be stopped.
    answer = _post(
        owner,
        f"{base}/new",
        fields | {"operation": "signal", "signal_name": "poke", "signal_input": '{"a": 1}'},
        token,
    )
    assert answer.status_code == 303
    batch = BatchOperation.objects.get(namespace=namespace)
    assert answer["Location"] == f"{base}/{batch.job_id}"
    assert (batch.total, batch.reason, batch.query, batch.identity) == (
        3,
        "mine",
        query,
        f"console: owner@{org}.example",
    )
    assert sorted(BatchTarget.objects.filter(batch=batch).values_list("workflow_id", flat=True)) == sorted(
        w for w, _ in started
    )
    entry = AuditEvent.objects.filter(action="StartBatchOperation").latest("id")
    assert (entry.actor_label, entry.via, entry.outcome, entry.target) == (
        f"owner@{org}.example",
        "console",
        "ok",
        f"batch/{batch.job_id}",
    )
    assert entry.details == {"operation": "signal", "signal_name": "poke", "by_query": True}

    page = owner.client.get(f"{base}/{batch.job_id}").content.decode()
    assert "Stop batch" in page
    assert f'data-live="/live{base}/{batch.job_id}"' in page
    reader_page = reader.client.get(f"{base}/{batch.job_id}").content.decode()
    assert "Stop batch" not in reader_page
    assert _post(reader, f"{base}/{batch.job_id}/stop", {"reason": "x"}, reader_token).status_code == 403
    stopped = _post(owner, f"{base}/{batch.job_id}/stop", {"reason": "enough"}, token)
    assert stopped.status_code == 303
    batch.refresh_from_db()
    assert (batch.state, batch.stop_reason) == (BatchOperationState.BATCH_OPERATION_STATE_FAILED, "enough")
    stop_entries = AuditEvent.objects.filter(action="StopBatchOperation").order_by("id")
    assert [(e.actor_label, e.outcome) for e in stop_entries] == [
        (f"reader@{org}.example", "denied"),
        (f"owner@{org}.example", "ok"),
    ]
    listed_batches = owner.client.get(base).content.decode()
    assert batch.job_id in listed_batches
    assert "Failed" in listed_batches


def test_a_reset_batch_names_its_point_and_exclusions(tenants):  # noqa: F811
    """The reset operation the form starts: the point chosen, the re-application exclusions ticked, both
    in the request the batch keeps and in the audit entry; a reset without a point is refused."""
    owner, _reader, _stranger, _org, namespace = tenants
    [_start(str(namespace.id)) for _ in range(2)]
    query = "TaskQueue = 'orders'"
    base = f"/namespaces/{namespace.name}/batch-operations"
    token = CSRF.search(owner.client.get(f"{base}/new", {"query": query}).content.decode()).group(1)
    fields = {"query": query, "operation": "reset", "reason": "replay", "confirm": "yes"}
    refused = _post(owner, f"{base}/new", fields, token)
    assert refused.status_code == 400
    assert "Pick the point each run is reset to." in refused.content.decode()
    assert not BatchOperation.objects.filter(namespace=namespace).exists()

    answer = _post(owner, f"{base}/new", fields | {"reset_point": "first", "exclude_updates": "yes"}, token)
    assert answer.status_code == 303
    batch = BatchOperation.objects.get(namespace=namespace)
    operation = batches.operation_of(batch)
    assert operation.WhichOneof("operation") == "reset_operation"
    options = operation.reset_operation.options
    assert options.HasField("first_workflow_task")
    assert list(options.reset_reapply_exclude_types) == [
        ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE
    ]
    entry = AuditEvent.objects.filter(action="StartBatchOperation").latest("id")
    assert entry.details == {
        "operation": "reset",
        "reset_point": "first",
        "exclude": ["update"],
        "by_query": True,
    }
