"""The Celery app of the shard workers: timer firing on wake-up messages, plus beat's periodic sweep."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "perdura.settings")

app = Celery("perdura")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["engine"])
app.conf.beat_schedule = {
    "sweep-shards": {
        "task": "engine.tasks.sweep",
        "schedule": float(os.environ.get("PERDURA_SWEEP_SECONDS", "2")),
        "options": {"expires": 10},
    }
}
