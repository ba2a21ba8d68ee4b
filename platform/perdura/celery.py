"""The Celery app of the shard workers: timer firing on wake-up messages, plus beat's periodic tasks
(the shard sweep, the audit log's retention)."""

from __future__ import annotations

import logging
import os

from celery import Celery, signals
from celery.apps import worker as celery_worker
from celery.schedules import crontab

from perdura import logs

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "perdura.settings")

if logs.is_json():
    # Celery installs its own text handlers unless a receiver of this signal configures logging instead.
    @signals.setup_logging.connect
    def _json_logging(loglevel: int | str | None = None, **_: object) -> None:
        logs.configure(loglevel)

    def _say(msg: str, f: object = None) -> None:
        logging.getLogger("celery.worker").info(msg.strip())

    # The worker's shutdown notices ("worker: Cold shutdown (MainProcess)") are written straight to the
    # terminal's file descriptor, past logging and --quiet: logged instead. (Logging's lock is reentrant,
    # so doing this in a signal handler, as Celery does, cannot deadlock on it.)
    celery_worker.safe_say = _say  # type: ignore[attr-defined]  # celery-types omit this module function we replace


@signals.worker_process_init.connect
def _traces(**_: object) -> None:
    """Each pool process exports its own spans (the exporter's thread does not survive the fork)."""
    from perdura import tracing

    tracing.configure("perdura-worker")


@signals.worker_process_init.connect
def _freeze_startup_objects(**_: object) -> None:
    """Full collections skip what the pool process started with (perdura/heap.py)."""
    from perdura import heap

    heap.freeze_startup_objects()


from django.conf import settings  # noqa: E402 - once DJANGO_SETTINGS_MODULE is set

app = Celery("perdura")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["engine", "tenants"])
# Celery's Django fixup closes every database connection before and after each task unless told to reuse
# them: each timer wake-up then opened a new Postgres session, a third of a busy pool's time (py-spy).
# Reused for this many tasks instead; a connection that failed is closed before the next task
# (_drop_broken_connections), as Django does between requests.
app.conf.CELERY_DB_REUSE_MAX = 1000


@signals.task_prerun.connect
def _drop_broken_connections(**_: object) -> None:
    from django.db import close_old_connections

    close_old_connections()


app.conf.beat_schedule = {
    "sweep-shards": {
        "task": "engine.tasks.sweep",
        "schedule": settings.PERDURA_SWEEP_SECONDS,
        "options": {"expires": 10},
    },
    # A deleted namespace's runs go through retention, a bounded batch a pass (engine/shards/namespace_purge.py).
    "purge-deleted-namespaces": {
        "task": "engine.tasks.purge_deleted_namespaces",
        "schedule": 5.0,
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
