"""The Celery app of the shard workers: timer firing on wake-up messages, plus beat's periodic tasks
(the shard sweep, the audit log's retention)."""

from __future__ import annotations

import os

from celery import Celery
from celery.schedules import crontab

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "perdura.settings")

app = Celery("perdura")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["engine", "tenants"])
app.conf.beat_schedule = {
    "sweep-shards": {
        "task": "engine.tasks.sweep",
        "schedule": float(os.environ.get("PERDURA_SWEEP_SECONDS", "2")),
        "options": {"expires": 10},
    },
    # Daily at a fixed hour (UTC), so beat restarts cannot postpone it as they would an interval;
    # a pass with nothing older than the retention deletes nothing.
    "prune-audit-log": {
        "task": "tenants.tasks.audit_prune",
        "schedule": crontab(hour=3, minute=17),
        "options": {"expires": 3600},
    },
}
