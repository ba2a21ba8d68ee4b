"""The schedule forms' GETs follow the same roles as their posts: a reader gets 403 and no form, an
operator the form; a reader's post is refused and audited as denied; another tenant's schedule is 404."""

from __future__ import annotations

import pytest
from django.test import Client

from tenants.models import AuditEvent
from tests.integration.test_console_authorization import world  # noqa: F401 (a fixture)
from tests.integration.test_run_export_rest import signing_key  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def test_schedule_forms_by_role(world):  # noqa: F811
    reader, operator, other = Client(), Client(), Client()
    reader.force_login(world.users["reader"])
    operator.force_login(world.users["operator"])
    other.force_login(world.users["other"])
    base = f"/namespaces/{world.namespace.name}"
    create, edit = f"{base}/create-schedule", f"{base}/schedules/{world.schedule_id}/edit"

    for url in (create, edit):
        refused = reader.get(url)
        assert refused.status_code == 403
        assert b'name="reason"' not in refused.content
        offered = operator.get(url)
        assert offered.status_code == 200
        assert b'name="reason"' in offered.content
        assert b"csrfmiddlewaretoken" in offered.content
    assert other.get(edit).status_code == 404
    assert b"Create schedule" not in reader.get(f"{base}/schedules").content
    assert b"Create schedule" in operator.get(f"{base}/schedules").content

    posted = reader.post(
        edit, {"spec_kind": "keep", "workflow_type": "X", "task_queue": "q", "reason": "r", "confirm": "yes"}
    )
    assert posted.status_code == 403
    denied = AuditEvent.objects.filter(target=f"schedule/{world.schedule_id}", action="UpdateSchedule").get()
    assert (denied.outcome, denied.code, denied.via) == ("denied", "403", "console")


def test_a_reader_cannot_delete_a_schedule(world):  # noqa: F811
    reader, operator = Client(), Client()
    reader.force_login(world.users["reader"])
    operator.force_login(world.users["operator"])
    url = f"/namespaces/{world.namespace.name}/schedules/{world.schedule_id}"
    assert b"Delete schedule" not in reader.get(url).content
    assert b"Delete schedule" in operator.get(url).content
    assert reader.post(url + "/delete", {"reason": "mine", "confirm": "yes"}).status_code == 403
    assert reader.get(url).status_code == 200  # still there
    denied = AuditEvent.objects.filter(target=f"schedule/{world.schedule_id}", action="DeleteSchedule").get()
    assert (denied.outcome, denied.via) == ("denied", "console")
    unconfirmed = operator.post(url + "/delete", {"reason": "retired"})
    assert unconfirmed.status_code == 400
    assert b"tick the confirmation" in unconfirmed.content
    done = operator.post(url + "/delete", {"reason": "retired", "confirm": "yes"})
    assert done.status_code == 303
    assert operator.get(url).status_code == 404
    entry = AuditEvent.objects.filter(target=f"schedule/{world.schedule_id}", action="DeleteSchedule").latest(
        "id"
    )
    assert (entry.outcome, entry.details) == ("ok", {"reason": "retired"})
