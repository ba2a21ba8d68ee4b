"""Purging a deleted namespace's runs through retention: terminate the open ones, make every retention
row of the namespace due now, and let the shard passes delete the runs (engine/shards/retention.py).

DeleteNamespace (gRPC, REST) only marks the namespace deleted and renames it; this pass, run by beat
(and `perdura dev`'s loop) every few seconds, does the rest in bounded batches, so a namespace of a
million runs is purged over many passes without one long transaction. It reads the (small) namespace
table and, per deleted namespace, its runs through the run index by namespace: never every run.
"""

from __future__ import annotations

import logging

from perdura import clock

from engine.errors import NotFound
from engine.models import Execution, Retention
from engine.services import workflows
from tenants.models import Namespace

log = logging.getLogger(__name__)
TERMINATE_BATCH = 100
"""Open runs terminated per namespace and pass (each its own transaction through the write path)."""
DUE_BATCH = 1000
"""Retention rows made due per namespace and pass (one UPDATE)."""
REASON = "Namespace deleted"


def _terminate_open(namespace: Namespace) -> int:
    open_runs = Execution.objects.filter(namespace=namespace, close_time__isnull=True)
    done = 0
    for workflow_id, run_id in open_runs.values_list("workflow_id", "run_id")[:TERMINATE_BATCH]:
        try:
            workflows.workflow_terminate(
                namespace=namespace,
                workflow_id=workflow_id,
                run_id=run_id,
                reason=REASON,
                details=None,
                identity="namespace-deleter",
            )
            done += 1
        except NotFound:
            pass  # closed meanwhile: its retention row exists already
    return done


def _make_due(namespace: Namespace) -> int:
    """Bring the namespace's retention rows that are not due yet forward to now (parked ones stay
    parked: the operator sees them). Their runs are then deleted by the shard passes."""
    now = clock.now()
    waiting = Retention.objects.filter(namespace=namespace, parked_at__isnull=True, due_at__gt=now)
    pks = list(waiting.values_list("pk", flat=True)[:DUE_BATCH])
    return Retention.objects.filter(pk__in=pks).update(due_at=now) if pks else 0


def purge_pass() -> int:
    """One bounded pass over every deleted namespace that still has runs; returns the rows it moved on
    (runs terminated plus retention rows made due). Idempotent: a pass that finds nothing does nothing."""
    moved = 0
    deleted = Namespace.objects.filter(state=Namespace.State.DELETED)
    for namespace in deleted:
        if not Execution.objects.filter(namespace=namespace).exists():
            continue
        moved += _terminate_open(namespace) + _make_due(namespace)
    if moved:
        log.info("deleted namespaces: %s runs terminated or made due for deletion", moved)
    return moved
