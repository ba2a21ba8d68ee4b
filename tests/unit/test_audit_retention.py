"""Audit retention's configuration: PERDURA_AUDIT_RETENTION_DAYS and beat's daily prune."""

from __future__ import annotations

import pytest
from perdura import env


@pytest.mark.parametrize(("value", "days"), [(None, 400), ("", 400), ("0", 0), ("30", 30), ("2555", 2555)])
def test_the_retention_is_a_number_of_days_or_zero_for_forever(monkeypatch, value, days):
    if value is None:
        monkeypatch.delenv("PERDURA_AUDIT_RETENTION_DAYS", raising=False)
    else:
        monkeypatch.setenv("PERDURA_AUDIT_RETENTION_DAYS", value)
    assert env.audit_retention_days() == days


@pytest.mark.parametrize("value", ["29", "1", "-5", "1y", "400.5"])
def test_a_retention_under_a_month_or_not_in_days_is_refused_at_start(monkeypatch, value):
    monkeypatch.setenv("PERDURA_AUDIT_RETENTION_DAYS", value)
    with pytest.raises(SystemExit, match="at least 30"):
        env.audit_retention_days()


def test_beat_prunes_the_audit_log_daily_with_a_registered_task():
    from celery.schedules import crontab
    from perdura.celery import app

    from tenants import tasks

    entry = app.conf.beat_schedule["prune-audit-log"]
    assert entry["task"] == tasks.audit_prune.name == "tenants.tasks.audit_prune"
    assert isinstance(entry["schedule"], crontab)
    assert entry["task"] in app.tasks
