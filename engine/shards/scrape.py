"""The engine's state as Prometheus gauges, read from the database when a scrape asks: backlogs and parked rows.

Counters live in the processes that do the work; what waits in the tables is state no process holds, so
it is counted at scrape time by whoever serves it (`perdura worker`'s metrics port, `perdura dev`). Every
query is an aggregate over a partial or claim index, and the label sets are bounded: shards and queues
are fixed, and of the task queues only the MAX_TASK_QUEUES with the largest backlogs are reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Count, Min, Q, QuerySet
from perdura import clock, metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from temporalio.api.enums.v1 import ArchivalState

from engine.history.mutation import TaskKind, TransferKind
from engine.history.retention import Step
from engine.models import BatchOperation, Reencryption, Retention, Schedule, Task, Timer, Transfer
from engine.shards import parking

MAX_TASK_QUEUES = 200
"""Task queues reported per scrape, largest backlog first (queue names are the tenants' to choose)."""
_KINDS = {TaskKind.WORKFLOW: "workflow", TaskKind.ACTIVITY: "activity"}
GAUGES = (
    "perdura_task_queue_backlog_tasks",
    "perdura_task_queue_backlog_age_seconds",
    "perdura_timer_backlog_rows",
    "perdura_transfer_backlog_rows",
    "perdura_retention_backlog_rows",
    "perdura_archival_backlog_rows",
    "perdura_parked_rows",
)
"""The names EngineState reports (what the dashboard's test checks its queries against)."""


def _by_shard(query: QuerySet[Any]) -> dict[int, int]:
    """Rows of `query` per shard (shards without rows absent)."""
    return {row["shard"]: row["n"] for row in query.values("shard").annotate(n=Count("id")).order_by()}


class EngineState(Collector):
    """Collects the backlog and parked-row gauges (registered on the registry a metrics port serves)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = clock.now()
        yield from self._task_queues(now)
        shards = [str(s) for s in range(settings.PERDURA_SHARDS)]
        backlogs = (
            (
                "perdura_timer_backlog_rows",
                "Timers due and not yet fired, by shard (parked ones apart).",
                Timer.objects.filter(parked_at__isnull=True, fire_at__lte=now),
            ),
            (
                "perdura_transfer_backlog_rows",
                "Transfer rows (children, external signals, visibility, archival) waiting, by shard.",
                Transfer.objects.filter(parked_at__isnull=True).filter(
                    Q(retry_at__isnull=True) | Q(retry_at__lte=now)
                ),
            ),
            (
                "perdura_retention_backlog_rows",
                "Closed runs past their namespace's retention and not yet deleted, by shard.",
                Retention.objects.filter(parked_at__isnull=True, due_at__lte=now),
            ),
            (
                "perdura_archival_backlog_rows",
                "Of those, runs of namespaces that archive histories still waiting for their archive, by shard.",
                Retention.objects.filter(
                    parked_at__isnull=True,
                    due_at__lte=now,
                    step=Step.ARCHIVE,
                    namespace__history_archival_state=ArchivalState.ARCHIVAL_STATE_ENABLED,
                ),
            ),
        )
        for name, documentation, query in backlogs:
            family = GaugeMetricFamily(name, documentation, labels=["shard"])
            counts = _by_shard(query)
            for shard in shards:
                family.add_metric([shard], counts.get(int(shard), 0))
            yield family
        yield self._parked(shards)

    def _task_queues(self, now: datetime) -> Iterator[GaugeMetricFamily]:
        tasks = GaugeMetricFamily(
            "perdura_task_queue_backlog_tasks",
            "Tasks a poller could take now, by namespace, task queue and kind (the largest queues only).",
            labels=["namespace", "task_queue", "kind"],
        )
        age = GaugeMetricFamily(
            "perdura_task_queue_backlog_age_seconds",
            "How long the oldest takeable task of the queue has waited.",
            labels=["namespace", "task_queue", "kind"],
        )
        rows = (
            Task.objects.filter(visible_at__lte=now, kind__in=list(_KINDS))
            .values("namespace__name", "task_queue", "kind")
            .annotate(n=Count("id"), oldest=Min("visible_at"))
            .order_by("-n")[:MAX_TASK_QUEUES]
        )
        merged: dict[tuple[str, str, str], tuple[int, datetime]] = {}
        for row in rows:
            key = (metrics.namespace_label(row["namespace__name"]), row["task_queue"], _KINDS[row["kind"]])
            count, oldest = merged.get(key, (0, row["oldest"]))
            merged[key] = (count + row["n"], min(oldest, row["oldest"]))
        for key, (count, oldest) in merged.items():
            tasks.add_metric(list(key), count)
            age.add_metric(list(key), max((now - oldest).total_seconds(), 0.0))
        yield tasks
        yield age

    def _parked(self, shards: list[str]) -> GaugeMetricFamily:
        family = GaugeMetricFamily(
            "perdura_parked_rows",
            "Shard queue rows parked after their last attempt (`perdura shards parked` lists them), "
            "by shard and queue.",
            labels=["shard", "queue"],
        )
        transfers = Transfer.objects.filter(parked_at__isnull=False)
        queries = {
            parking.TIMER: Timer.objects.filter(parked_at__isnull=False),
            parking.TRANSFER: transfers.exclude(kind=TransferKind.VISIBILITY),
            parking.VISIBILITY: transfers.filter(kind=TransferKind.VISIBILITY),
            parking.SCHEDULE: Schedule.objects.filter(parked_at__isnull=False),
            parking.RETENTION: Retention.objects.filter(parked_at__isnull=False),
            parking.BATCH: BatchOperation.objects.filter(parked_at__isnull=False),
            parking.REENCRYPTION: Reencryption.objects.filter(parked_at__isnull=False),
        }
        for queue, query in queries.items():
            counts = _by_shard(query)
            for shard in shards:
                family.add_metric([shard, queue], counts.get(int(shard), 0))
        return family
