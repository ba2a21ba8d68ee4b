"""The audit log on Postgres: append-only to the database itself, written in the change's transaction,
listed and exported per organisation and namespace through the REST API without crossing tenants."""

from __future__ import annotations

import json
import uuid

import pytest
from django.db import DatabaseError, connection, transaction

from tenants import audit
from tenants.models import AuditEvent, Namespace
from tenants.services import namespaces, organizations
from tests.integration.test_rest_api import Api, create_key, create_namespace, signup

pytestmark = pytest.mark.django_db


@pytest.fixture
def org():
    return organizations.organization_create(slug=f"o{uuid.uuid4().hex[:8]}", owner_email="owner@example.com")


def actions(**filters) -> list[str]:
    return list(AuditEvent.objects.filter(**filters).order_by("id").values_list("action", flat=True))


def test_entries_cannot_be_changed_or_removed_even_with_sql(org):
    event = AuditEvent.objects.filter(organization_id=org.id).first()
    assert event is not None
    with pytest.raises(TypeError, match="append-only"):
        event.save()
    with pytest.raises(TypeError, match="append-only"):
        AuditEvent.objects.filter(pk=event.pk).update(outcome="denied")
    with pytest.raises(TypeError, match="append-only"):
        AuditEvent.objects.filter(pk=event.pk).delete()
    for sql in [
        "UPDATE tenants_auditevent SET outcome = 'denied' WHERE id = %s",
        "DELETE FROM tenants_auditevent WHERE id = %s",
    ]:
        with (
            pytest.raises(DatabaseError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as c,
        ):
            c.execute(sql, [event.pk])
    assert AuditEvent.objects.get(pk=event.pk).outcome == "ok"


def test_a_change_and_its_entry_commit_or_roll_back_together(org, monkeypatch):
    context = audit.AuditContext(actor=audit.operator_actor("cli", "ops"), source="host-1", via="cli")
    with audit.acting(context):
        namespace = namespaces.namespace_register(name=f"a.{org.slug}", organization=org, retention_days=2)
    event = AuditEvent.objects.get(namespace_id=namespace.id)
    assert (event.action, event.target, event.outcome, event.organization_id) == (
        "namespace.register",
        f"namespace/a.{org.slug}",
        "ok",
        org.id,
    )
    assert (event.actor_kind, event.actor_id, event.actor_label, event.source, event.via) == (
        "operator",
        "cli",
        "ops",
        "host-1",
        "cli",
    )
    assert event.details == {"retention_days": 2}

    # Rolled back with the transaction that made the change: no entry for a change that did not happen.
    def update_then_fail():
        with transaction.atomic():
            namespaces.namespace_update(namespace=namespace, description="never")
            raise RuntimeError("the change fails after its entry was written")

    with pytest.raises(RuntimeError):
        update_then_fail()
    assert actions(namespace_id=namespace.id) == ["namespace.register"]

    # A change whose entry cannot be written does not happen either.
    def broken(**kwargs):
        raise RuntimeError("audit log unavailable")

    monkeypatch.setattr(audit, "record_change", broken)
    with pytest.raises(RuntimeError, match="unavailable"):
        namespaces.namespace_register(name=f"b.{org.slug}", organization=org)
    assert not Namespace.objects.filter(name=f"b.{org.slug}").exists()
    with pytest.raises(RuntimeError, match="unavailable"):
        namespaces.namespace_deprecate(namespace=namespace)
    assert Namespace.objects.get(pk=namespace.pk).state == Namespace.State.REGISTERED


def test_control_plane_changes_through_rest_are_recorded_with_the_person_and_address():
    api, org = signup()
    ns = create_namespace(api, "orders")
    key = create_key(api, [ns["id"]], role="reader", name="viewer").json()
    api.patch(f"/api/v1/namespaces/{ns['id']}/", {"retention_days": 9})
    api.post(f"/api/v1/api-keys/{key['id']}/revoke/")
    api.post("/api/v1/invitations/", {"email": "bob@example.com", "role": "member"})
    api.patch("/api/v1/organization/", {"name": "Orders Inc"})
    rows = api.get("/api/v1/audit/?limit=1000").json()["results"]
    assert [r["action"] for r in reversed(rows)] == [
        "organization.create",
        "member.add",
        "namespace.register",
        "apikey.create",
        "namespace.update",
        "apikey.revoke",
        "invitation.create",
        "organization.update",
    ]
    for row in rows:
        assert row["actor"]["kind"] == "user", row
        assert row["actor"]["label"] == f"owner@{org}.example"
        assert row["source"] == "127.0.0.1"
        assert row["via"] == "rest"
        assert row["outcome"] == "ok"
    created = next(r for r in rows if r["action"] == "apikey.create")
    assert created["target"] == f"apikey/pdk_{key['prefix'].removeprefix('pdk_')}"
    assert created["details"]["role"] == "reader"
    assert created["namespace"] == ns["name"]
    exported = b"".join(api.get("/api/v1/audit/export").streaming_content)
    assert key["key"] not in exported.decode()
    assert key["key"].split("_", 2)[2] not in json.dumps(rows)


def test_listing_and_export_are_confined_to_the_organisation_and_the_admins():
    victim, victim_org = signup()
    victim_ns = create_namespace(victim, "secret")
    attacker, attacker_org = signup()
    own = create_namespace(attacker, "mine")
    # Another tenant's namespace, by id or by name, is not found; their entries never show.
    for ref in (victim_ns["id"], victim_ns["name"]):
        assert attacker.get(f"/api/v1/audit/?namespace={ref}").status_code == 404
        assert attacker.get(f"/api/v1/audit/export?namespace={ref}").status_code == 404
    rows = attacker.get("/api/v1/audit/").json()["results"]
    lines = b"".join(attacker.get("/api/v1/audit/export/").streaming_content).decode().splitlines()
    assert rows
    assert len(lines) == len(rows)
    for row in [*rows, *map(json.loads, lines)]:
        assert victim_org not in json.dumps(row)
    # A namespace's log needs its admin role; the organisation's, an owner or admin.
    reader = Api(key=create_key(attacker, [own["id"]], role="reader").json()["key"])
    admin = Api(key=create_key(attacker, [own["id"]], role="admin").json()["key"])
    assert reader.get(f"/api/v1/audit/?namespace={own['id']}").status_code == 403
    assert admin.get("/api/v1/audit/").status_code == 403
    listed = admin.get(f"/api/v1/audit/?namespace={own['name']}").json()["results"]
    assert {r["namespace"] for r in listed} == {own["name"]}
    # The refused attempt is itself recorded, in the attacker's organisation only.
    denied = attacker.get("/api/v1/audit/?limit=1000").json()["results"]
    assert not any(r["outcome"] == "denied" for r in victim.get("/api/v1/audit/").json()["results"])
    assert denied


def test_pages_and_time_ranges():
    api, _ = signup()
    for name in ("a", "b", "c"):
        create_namespace(api, name)
    first = api.get("/api/v1/audit/?limit=2").json()
    assert len(first["results"]) == 2
    second = api.get(f"/api/v1/audit/?limit=2&cursor={first['next_cursor']}").json()
    ids = [r["id"] for r in first["results"] + second["results"]]
    assert ids == sorted(ids, reverse=True)
    assert len(set(ids)) == 4
    assert api.get("/api/v1/audit/?since=1h").json()["results"]
    assert api.get("/api/v1/audit/?until=2000-01-01").json()["results"] == []
    assert api.get("/api/v1/audit/?since=soon").status_code == 400


def test_an_entry_naming_more_than_its_columns_hold_is_kept_cut(org):
    """A refused call may name a namespace and a target up to the edge's 1000-character limits; on Postgres an
    entry that did not fit its columns was refused by the database and the call went unrecorded."""
    entry = audit.record(
        action="SignalWorkflowExecution",
        target="workflow/" + "w" * 990,
        organization_id=org.id,
        namespace_name="n" * 1000,
        outcome="denied",
        code="PERMISSION_DENIED",
    )
    saved = AuditEvent.objects.get(pk=entry.pk)
    assert saved.namespace == "n" * 255
    assert saved.target == ("workflow/" + "w" * 990)[:512]
    assert (saved.outcome, saved.code) == ("denied", "PERMISSION_DENIED")
