"""The console's schedule actions, history export and timeline part for signed-in people (Django's test
client with CSRF checks, on Postgres): an operator pauses with a note, triggers and backfills, each audited
as `PatchSchedule` with the person; a reader sees no action and a forged POST of theirs answers 403 (and
is logged as denied); a POST without the CSRF token is refused; another organisation gets 404; an export
is audited as `export.run` with the person, via the console."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import caches
from google.protobuf.duration_pb2 import Duration
from temporalio.api.common.v1 import WorkflowType
from temporalio.api.schedule.v1 import IntervalSpec, Schedule, ScheduleAction, ScheduleSpec
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflow.v1 import NewWorkflowExecutionInfo
from temporalio.api.workflowservice.v1 import CreateScheduleRequest

from engine.services import schedules as schedule_service
from tenants.models import AuditEvent, Namespace
from tests.integration.test_console_history_cache import _signal
from tests.integration.test_rest_api import create_namespace, invite_and_join, signup
from tests.integration.test_run_export_rest import _start, signing_key  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_throttles():
    """Each test signs people up: the sign-up throttle would refuse them after a few runs."""
    caches["throttle"].clear()
    yield
    caches["throttle"].clear()


CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def _schedule(namespace: Namespace) -> str:
    schedule_id = f"nightly-{uuid.uuid4().hex[:6]}"
    schedule_service.schedule_create(
        namespace=namespace,
        request=CreateScheduleRequest(
            namespace=namespace.name,
            schedule_id=schedule_id,
            request_id=str(uuid.uuid4()),
            schedule=Schedule(
                spec=ScheduleSpec(interval=[IntervalSpec(interval=Duration(seconds=6 * 3600))]),
                action=ScheduleAction(
                    start_workflow=NewWorkflowExecutionInfo(
                        workflow_id=f"{schedule_id}-run",
                        workflow_type=WorkflowType(name="Report"),
                        task_queue=TaskQueue(name="reports"),
                    )
                ),
            ),
        ),
    )
    return schedule_id


def _describe(namespace: Namespace, schedule_id: str):
    return schedule_service.schedule_describe(namespace=namespace, schedule_id=schedule_id)


@pytest.fixture
def tenants():
    owner, org = signup()
    ns = create_namespace(owner, "orders")
    reader = invite_and_join(owner, f"reader@{org}.example")
    members = owner.get("/api/v1/members/").json()
    reader_id = next(m["id"] for m in members if m["email"] == f"reader@{org}.example")
    assert (
        owner.put(f"/api/v1/namespaces/{ns['id']}/access/{reader_id}/", {"role": "reader"}).status_code == 200
    )
    stranger, _ = signup()
    return owner, reader, stranger, org, Namespace.objects.get(pk=ns["id"])


def _post(api, path: str, data: dict, token: str | None):
    body = dict(data)
    if token is not None:
        body["csrfmiddlewaretoken"] = token
    return api.client.post(path, body)


def test_operators_pause_trigger_and_backfill_readers_see_no_actions_and_are_refused(tenants):
    owner, reader, stranger, org, namespace = tenants
    schedule_id = _schedule(namespace)
    page = f"/namespaces/{namespace.name}/schedules/{schedule_id}"

    listed = owner.client.get(f"/namespaces/{namespace.name}/schedules")
    assert listed.status_code == 200
    assert schedule_id in listed.content.decode()
    assert "every 6h" in listed.content.decode()
    shown = owner.client.get(page)
    assert shown.status_code == 200
    html = shown.content.decode()
    assert f"{page}/pause" in html
    assert f"{page}/trigger" in html
    assert f"{page}/backfill" in html
    token = CSRF.search(html).group(1)

    # A reader sees the schedule, no action; a forged POST is refused and logged as denied.
    seen = reader.client.get(page)
    assert seen.status_code == 200
    assert "/pause" not in seen.content.decode()
    assert "Trigger now" not in seen.content.decode()
    reader_token = CSRF.search(seen.content.decode()).group(1)  # the sign-out form's
    refused = _post(reader, f"{page}/pause", {"note": "mine now"}, reader_token)
    assert refused.status_code == 403
    assert not _describe(namespace, schedule_id).schedule.state.paused
    denied = AuditEvent.objects.filter(action="PatchSchedule").latest("id")
    assert (denied.actor_kind, denied.actor_label, denied.via, denied.outcome) == (
        "user",
        f"reader@{org}.example",
        "console",
        "denied",
    )
    # Another organisation's person: the namespace does not exist for them.
    assert stranger.client.get(page).status_code == 404
    assert stranger.client.get(f"/namespaces/{namespace.name}/schedules").status_code == 404

    # Without the CSRF token nothing happens, whoever posts.
    assert _post(owner, f"{page}/pause", {"note": "x"}, None).status_code == 403
    assert not _describe(namespace, schedule_id).schedule.state.paused

    # A pause needs its note.
    missing = _post(owner, f"{page}/pause", {"note": "  "}, token)
    assert missing.status_code == 400
    assert "say why the schedule is paused" in missing.content.decode()

    paused = _post(owner, f"{page}/pause", {"note": "<b>maintenance</b>"}, token)
    assert paused.status_code == 303
    assert paused["Location"] == f"{page}?done=pause"
    state = _describe(namespace, schedule_id).schedule.state
    assert (state.paused, state.notes) == (True, "<b>maintenance</b>")
    after = owner.client.get(paused["Location"]).content.decode()
    assert "&lt;b&gt;maintenance&lt;/b&gt;" in after
    assert "<b>maintenance</b>" not in after
    entry = AuditEvent.objects.filter(action="PatchSchedule").latest("id")
    assert (entry.actor_kind, entry.actor_label, entry.via, entry.outcome, entry.target) == (
        "user",
        f"owner@{org}.example",
        "console",
        "ok",
        f"schedule/{schedule_id}",
    )
    assert entry.details == {"patch": "pause"}
    assert entry.namespace_id == namespace.id

    assert _post(owner, f"{page}/trigger", {"overlap": "6"}, token).status_code == 303  # allow all
    assert _describe(namespace, schedule_id).info.action_count == 1

    backwards = _post(
        owner, f"{page}/backfill", {"start": "2026-01-02T00:00", "end": "2026-01-01T00:00"}, token
    )
    assert backwards.status_code == 400
    assert "end must be after its start" in backwards.content.decode()
    failed = AuditEvent.objects.filter(action="PatchSchedule").latest("id")
    assert (failed.outcome, failed.code) == ("failed", "INVALID_ARGUMENT")
    end = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
    start = end - timedelta(hours=12)
    backfilled = _post(
        owner,
        f"{page}/backfill",
        {
            "start": start.strftime("%Y-%m-%dT%H:%M:%S"),
            "end": end.strftime("%Y-%m-%dT%H:%M:%S"),
            "overlap": "6",
        },
        token,
    )
    assert backfilled.status_code == 303
    # Every 6 hours over 12 hours: two actions (or three when a boundary falls on an end), after the trigger.
    assert _describe(namespace, schedule_id).info.action_count in (3, 4)
    assert AuditEvent.objects.filter(action="PatchSchedule").latest("id").details["patch"] == "backfill"

    assert _post(owner, f"{page}/unpause", {"note": ""}, token).status_code == 303
    assert not _describe(namespace, schedule_id).schedule.state.paused


def test_a_reader_exports_a_run_from_the_console_audited_as_theirs(tenants, signing_key):  # noqa: F811
    owner, reader, stranger, org, namespace = tenants
    workflow_id, run_id = _start(str(namespace.id))
    run_page = f"/namespaces/{namespace.name}/workflows/{workflow_id}/{run_id}/history"
    html = reader.client.get(run_page).content.decode()
    export = f"/namespaces/{namespace.name}/workflows/{workflow_id}/{run_id}/export"
    assert f'href="{export}"' in html
    answer = reader.client.get(export)
    assert answer.status_code == 200
    assert answer["Content-Disposition"] == f'attachment; filename="{workflow_id}_{run_id}_history.json"'
    document = json.loads(answer.content)
    assert document["events"][0]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"
    entry = AuditEvent.objects.filter(action="export.run").latest("id")
    assert (entry.actor_kind, entry.actor_label, entry.via, entry.target) == (
        "user",
        f"reader@{org}.example",
        "console",
        f"workflow/{workflow_id}/{run_id}",
    )
    assert entry.details["head"] == document["manifest"]["head"]
    # Another organisation's person: 404, and nothing exported.
    before = AuditEvent.objects.filter(action="export.run").count()
    assert stranger.client.get(export).status_code == 404
    assert AuditEvent.objects.filter(action="export.run").count() == before

    part = reader.client.get(f"/namespaces/{namespace.name}/workflows/{workflow_id}/{run_id}/timeline")
    assert part.status_code == 200
    assert 'id="timeline"' in part.content.decode()
    assert "Workflow: Order" in part.content.decode()
    assert (
        stranger.client.get(
            f"/namespaces/{namespace.name}/workflows/{workflow_id}/{run_id}/timeline"
        ).status_code
        == 404
    )


def test_the_timeline_pages_its_rows_newest_first(tenants):
    _owner, reader, _stranger, _org, namespace = tenants
    workflow_id, run_id = _start(str(namespace.id))
    for n in range(120):
        _signal(namespace, workflow_id, run_id, n)
    base = f"/namespaces/{namespace.name}/workflows/{workflow_id}/{run_id}"
    newest = reader.client.get(f"{base}/history").content.decode()
    assert "rows 101–121 of 121" in newest
    assert "Signal: s119" in newest
    assert "Signal: s98" not in newest
    assert f'hx-get="{base}/timeline?timeline=1"' in newest
    first = reader.client.get(f"{base}/timeline?timeline=1")
    assert first.status_code == 200
    html = first.content.decode()
    assert "rows 1–100 of 121" in html
    assert "Workflow: Order" in html
    assert "Signal: s98" in html
    assert "Signal: s99" not in html
    # Paging keeps the history's own parameters, and pushes the run page's URL.
    kept = reader.client.get(f"{base}/timeline?view=compact&timeline=1").content.decode()
    assert f'hx-push-url="{base}/history?view=compact&amp;timeline=2"' in kept
