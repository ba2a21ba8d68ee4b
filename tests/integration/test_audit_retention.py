"""Audit retention on Postgres: `audit.prune` is the one path that deletes entries, only those older than
the retention and never the last 30 days; UPDATE and every other DELETE stay refused by the trigger."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest
from django.db import DatabaseError, connection, transaction
from perdura import clock

from tenants import audit
from tenants.models import AuditEvent

pytestmark = pytest.mark.django_db
ORG = uuid.uuid4()
"""The organisation of this file's entries, so other tests' rows never count."""


def entry(age: timedelta, action: str = "namespace.update") -> AuditEvent:
    """An entry written `age` ago."""
    return AuditEvent.objects.create(
        time=clock.now() - age,
        organization_id=ORG,
        actor_kind="user",
        actor_id="1",
        action=action,
        target="namespace/n",
        via="rest",
        outcome="ok",
    )


def remaining() -> set[int]:
    return set(AuditEvent.objects.filter(organization_id=ORG).values_list("id", flat=True))


def sql(statement: str, *params) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement, list(params))


def forged(cutoff: datetime, statement: str, *params) -> None:
    """`statement` in a transaction that first sets the prune's setting by hand, as `audit.prune` does."""
    with transaction.atomic():
        sql("SELECT set_config('perdura.audit_prune', %s, true)", cutoff.isoformat())
        sql(statement, *params)


def test_prune_deletes_only_the_entries_older_than_the_retention_and_records_itself():
    old = [entry(timedelta(days=days)).id for days in (401, 500, 900)]
    kept = [entry(timedelta(days=days)).id for days in (399, 31, 0)]
    result = audit.prune(retention_days=400, batch=2)  # two full batches and a last one
    assert result.deleted >= 3
    assert remaining() == set(kept)
    assert not AuditEvent.objects.filter(id__in=old).exists()
    assert result.cutoff is not None
    assert abs(result.cutoff - (clock.now() - timedelta(days=400))) < timedelta(minutes=1)
    # The prune is itself in the (operator's) log, with its cutoff and count.
    own = AuditEvent.objects.filter(action="audit.prune").latest("id")
    assert (own.organization_id, own.actor_kind, own.outcome, own.target) == (None, "system", "ok", "audit")
    assert own.details == {
        "cutoff": result.cutoff.isoformat(),
        "retention_days": 400,
        "deleted": result.deleted,
    }
    # Idempotent: nothing more is old enough, and a pass that deletes nothing records nothing.
    before = AuditEvent.objects.filter(action="audit.prune").count()
    assert audit.prune(retention_days=400).deleted == 0
    assert AuditEvent.objects.filter(action="audit.prune").count() == before


def test_the_retention_setting_is_the_default_and_zero_keeps_everything(settings):
    ids = {entry(timedelta(days=days)).id for days in (40, 4000)}
    settings.PERDURA_AUDIT_RETENTION_DAYS = 0
    assert audit.prune() == audit.PruneResult(deleted=0, cutoff=None)
    assert remaining() == ids
    settings.PERDURA_AUDIT_RETENTION_DAYS = 400
    assert audit.prune().deleted >= 1
    assert remaining() == {min(ids)}
    with pytest.raises(ValueError, match="at least 30 days"):
        audit.prune(retention_days=7)


def test_update_and_other_deletes_are_still_refused_by_the_database():
    old, recent = entry(timedelta(days=500)), entry(timedelta(days=1))
    table = AuditEvent._meta.db_table
    # Without the prune setting nothing may be deleted, however old; UPDATE never, setting or not.
    for statement in (
        f"DELETE FROM {table} WHERE id = %s",
        f"UPDATE {table} SET outcome = 'x' WHERE id = %s",
    ):
        with pytest.raises(DatabaseError, match="append-only"):
            sql(statement, old.id)
    with pytest.raises(DatabaseError, match="append-only"):
        forged(clock.now() - timedelta(days=100), f"UPDATE {table} SET outcome = 'x' WHERE id = %s", old.id)
    # With it, only rows older than its cutoff, and never with a cutoff younger than 30 days.
    for cutoff, victim in [
        (clock.now() - timedelta(days=100), recent),
        (clock.now(), recent),
        (clock.now() - timedelta(days=29), old),
    ]:
        with pytest.raises(DatabaseError, match="append-only"):
            forged(cutoff, f"DELETE FROM {table} WHERE id = %s", victim.id)
    assert remaining() == {old.id, recent.id}
    assert AuditEvent.objects.get(pk=old.pk).outcome == "ok"


def test_prune_inside_a_transaction_leaves_no_permission_behind():
    """The trigger's permission is cleared when a batch ends, even inside a caller's transaction."""
    old, older = entry(timedelta(days=500)), entry(timedelta(days=600))
    with transaction.atomic():
        assert audit.prune(retention_days=550).deleted >= 1
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('perdura.audit_prune', true)")
            assert cursor.fetchone()[0] in ("", None)
        with pytest.raises(DatabaseError, match="append-only"):
            sql(f"DELETE FROM {AuditEvent._meta.db_table} WHERE id = %s", old.id)
    assert remaining() == {old.id}
    assert not AuditEvent.objects.filter(id=older.id).exists()


def test_the_orm_still_refuses_updates_and_deletes():
    event = entry(timedelta(days=500))
    with pytest.raises(TypeError, match="append-only"):
        AuditEvent.objects.filter(pk=event.pk).delete()
    with pytest.raises(TypeError, match="append-only"):
        event.delete()
