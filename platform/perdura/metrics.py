"""Every Prometheus series a Perdura process records: their names, labels and buckets, in one place.

Names follow Prometheus's conventions (`perdura_` prefix, the unit in the name, `_total` on counters)
and every label is bounded: methods, gRPC codes, shards, queues of the engine and buckets are fixed sets;
namespaces are what tenants create, so their label can be switched off (PERDURA_METRICS_NAMESPACE_LABELS=0
records them all under ""), and one process labels at most MAX_NAMESPACES of them, the rest as "_other".
Workflow ids, run ids, task tokens and identities are never labels. Task-queue names appear only in the
backlog gauges read at scrape time (engine/shards/scrape.py), which report the largest queues only.

Recording is a per-process counter increment (prometheus-client's lock per value, nothing shared): under
PROMETHEUS_MULTIPROC_DIR each process writes its own mmap'd file and whoever serves the port sums them
(perdura/metrics_server.py), so no process waits on another to count.
"""

from __future__ import annotations

import os
import threading

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

# The `_created` series double what a scrape carries and no dashboard of ours reads them.
disable_created_metrics()

OTHER = "_other"
"""The namespace label of the namespaces past MAX_NAMESPACES in one process."""
MAX_NAMESPACES = 1000
"""Distinct namespace label values one process records; with one histogram per method and namespace,
this bounds a process's series even when callers name namespaces that do not exist."""

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 90)
"""RPC latency: a millisecond to past a long poll's minute (polls are charted apart)."""
LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)
"""How late a timer fires: a few milliseconds when healthy, minutes when workers are missing."""
TRANSACTION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)

# gRPC API (engine/api/metrics.py)
grpc_requests = Counter(
    "perdura_grpc_requests", "gRPC calls received, by method and namespace.", ["method", "namespace"]
)
grpc_errors = Counter(
    "perdura_grpc_errors",
    "gRPC calls answered with a status other than OK, by method, namespace and gRPC code.",
    ["method", "namespace", "code"],
)
grpc_duration = Histogram(
    "perdura_grpc_request_duration_seconds",
    "Time from a gRPC call's arrival to its answer (long polls included: chart Poll* apart).",
    ["method", "namespace"],
    buckets=LATENCY_BUCKETS,
)

# Matching (engine/api/rpc/waits.py)
long_polls_waiting = Gauge(
    "perdura_long_polls_waiting",
    "Task-queue polls waiting for a task right now, by namespace and task kind.",
    ["namespace", "kind"],
    multiprocess_mode="livesum",
)
tasks_matched = Counter(
    "perdura_tasks_matched",
    "Tasks handed out: match=sync when a poll was already waiting as the task arrived, match=backlog "
    "when the task waited in the queue table for a poll, match=eager when the answer of the call that "
    "made it carried it (eager start, eager activities, a workflow task answered to its completion).",
    ["namespace", "kind", "match"],
)
workflow_task_histories = Counter(
    "perdura_workflow_task_histories",
    "Histories sent with a workflow task, by where they came from: source=change (the change that started "
    "the task made all of it), memory (the run's recent changes in this process, "
    "engine/services/recent_events.py) or database (read after the task's start committed).",
    ["source"],
)

# Shards (engine/shards/, engine/persistence/leases.py)
timer_lateness = Histogram(
    "perdura_timer_lateness_seconds",
    "How long after its due time a timer fired, by shard.",
    ["shard"],
    buckets=LATENESS_BUCKETS,
)
shard_lease_acquisitions = Counter(
    "perdura_shard_lease_acquisitions",
    "Shard leases taken by this process (each bumps the fence).",
    ["shard"],
)
shard_lease_takeovers = Counter(
    "perdura_shard_lease_takeovers",
    "Shard leases taken over from another owner whose lease had expired (a worker died or stalled).",
    ["shard"],
)
shard_wakeups_spent = Counter(
    "perdura_shard_wakeups_spent",
    "Shard wake-ups (Celery messages) dropped unprocessed because a pass over the shard began after the "
    "work they announced was due: it had seen that work.",
)
shard_lease_lost = Counter(
    "perdura_shard_lease_lost",
    "Shard passes stopped because another worker took the lease meanwhile.",
    ["shard"],
)

# Limits and authentication (engine/api/ratelimits.py, engine/api/auth.py, tenants/rest/)
rate_limit_refusals = Counter(
    "perdura_rate_limit_refusals",
    "Calls refused by a namespace's rate limit, by namespace and bucket.",
    ["namespace", "bucket"],
)
key_rate_limit_refusals = Counter(
    "perdura_key_rate_limit_refusals",
    "Calls refused by their API key's own rate limit (its share of the namespace's), by namespace and "
    "bucket; the key is not a label (series without bound), the api process logs it by prefix.",
    ["namespace", "bucket"],
)
rest_rate_limit_refusals = Counter(
    "perdura_rest_rate_limit_refusals",
    "REST API and console organisation-page requests refused (429) by an organisation's rate limit, by "
    'organisation slug ("" when PERDURA_METRICS_NAMESPACE_LABELS is 0).',
    ["organization"],
)
auth_failures = Counter(
    "perdura_auth_failures",
    "Calls refused for their credentials: reason=missing, invalid (unknown, expired, revoked or "
    "malformed key), throttled (too many failures from the address) or denied (the key lacks the access).",
    ["interface", "reason"],
)

# Database and keys (engine/services/write_path.py, tenants/datakeys.py)
db_transaction_duration = Histogram(
    "perdura_db_transaction_duration_seconds",
    "Engine write transactions, each attempt from begin to commit or rollback.",
    ["fenced"],
    buckets=TRANSACTION_BUCKETS,
)
db_transaction_retries = Counter(
    "perdura_db_transaction_retries",
    "Engine write transactions run again: reason=deadlock (deadlock or serialisation failure) "
    "or conflict (a concurrent change to the same run).",
    ["reason"],
)
data_key_cache = Counter(
    "perdura_data_key_cache_requests",
    "Look-ups of a namespace's data key: result=hit (unwrapped in memory) or miss (read from the database).",
    ["result"],
)


class NamespaceLabels:
    """Namespace label values, bounded: "" when switched off, OTHER past MAX_NAMESPACES in this process."""

    def __init__(self, enabled: bool | None = None, limit: int = MAX_NAMESPACES) -> None:
        self.enabled = enabled
        """None: read PERDURA_METRICS_NAMESPACE_LABELS at the first call (not at import)."""
        self.limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, namespace: str) -> str:
        if self.enabled is None:
            self.enabled = namespace_labels_enabled()
        if not self.enabled:
            return ""
        if namespace in self._seen:  # the hot path: a set lookup, no lock
            return namespace
        with self._lock:
            if len(self._seen) >= self.limit:
                return OTHER
            self._seen.add(namespace)
        return namespace


def namespace_labels_enabled() -> bool:
    """PERDURA_METRICS_NAMESPACE_LABELS: 1 (default) labels series by namespace, 0 records every namespace as \"\"."""
    value = os.environ.get("PERDURA_METRICS_NAMESPACE_LABELS", "1").strip().lower()
    if value not in {"0", "1", "true", "false", "yes", "no", "on", "off"}:
        raise SystemExit(f"PERDURA_METRICS_NAMESPACE_LABELS must be 1 or 0, not {value!r}")
    return value in {"1", "true", "yes", "on"}


namespace_label = NamespaceLabels()
"""The label value of a namespace name, as every series with a namespace label records it."""
