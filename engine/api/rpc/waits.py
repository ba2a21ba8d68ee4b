"""Bounded waits of the long-polling RPCs: a deadline within the caller's, and the task queue long poll."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
from perdura import clock, metrics

from engine import dbthreads, notify
from engine.history.mutation import TaskKind
from engine.matching import queue
from engine.services import task_routing
from tenants.models import Namespace

LONG_POLL_SECONDS = 60.0
RECHECK_SECONDS = 5.0
"""A waiter re-reads at least this often: wake-ups are hints, and one may be lost."""
_KIND_LABELS: dict[int, str] = {TaskKind.WORKFLOW: "workflow", TaskKind.ACTIVITY: "activity"}


def deadline(context: grpc.aio.ServicerContext, cap: float) -> float:
    """The loop time at which to answer: `cap` seconds from now, or a second before the caller gives up."""
    remaining = context.time_remaining()
    budget = cap if remaining is None else min(cap, max(remaining - 1.0, 0.0))
    return asyncio.get_running_loop().time() + budget


async def long_poll(
    context: grpc.aio.ServicerContext,
    namespace: Namespace,
    kind: int,
    task_queue: str,
    poll_once: Callable[[], Any],
    group: str = "",
    offer: Callable[..., Any] | None = None,
) -> Any:
    """Claim a task now or when one arrives, until about a minute passes (then None: an empty answer).

    `group`: the worker deployment version the poller serves ("" unversioned; see notify.Hub.waiter).
    `offer`: how to start a task for this poll in the transaction that makes it, while it waits
    (engine/services/task_handoff.py); used only for a poller of no version in a namespace without
    deployments."""
    loop = asyncio.get_running_loop()
    until = deadline(context, LONG_POLL_SECONDS)
    label = metrics.namespace_label(namespace.name)
    kind_label = _KIND_LABELS.get(kind, "other")
    waiting = None  # this poll's share of the waiting gauge, once it has found the queue empty
    key = notify.task_queue_key(namespace.id, kind, task_queue)
    with notify.hub.waiter(key, group=group) as waiter:
        try:
            while True:
                outcome = _known_empty(namespace, key, group) or await dbthreads.run(poll_once)
                if not isinstance(outcome, queue.NotYet):
                    match = "backlog" if waiting is None else "sync"
                    metrics.tasks_matched.labels(label, kind_label, match).inc()
                    return outcome
                wait = RECHECK_SECONDS
                if outcome.visible_at is not None:
                    wait = min(max((outcome.visible_at - clock.now()).total_seconds(), 0.01), wait)
                remaining = until - loop.time()
                if remaining <= 0:
                    return None
                if waiting is None:
                    waiting = metrics.long_polls_waiting.labels(label, kind_label)
                    waiting.inc()
                if offer is not None and not group and task_routing.unversioned_known(namespace.id):
                    waiter.offer = offer
                    waiter.begin_idle()
                await waiter.wait(min(remaining, wait))
                await waiter.settle()
                if waiter.handed is not None:
                    metrics.tasks_matched.labels(label, kind_label, "handoff").inc()
                    return waiter.handed
                waiter.rearm()
        finally:
            if waiting is not None:
                waiting.dec()


def _known_empty(namespace: Namespace, key: str, group: str) -> queue.NotYet | None:
    """What the claim would answer from memory (engine/services/task_claims.py), answered here without
    handing the poll to a database thread: only for a poller of no version, in a namespace known to
    have no deployments (else the claim routes, and reads the queue)."""
    if group or not task_routing.unversioned_known(namespace.id):
        return None
    until = notify.hub.known_empty(key, clock.now())
    return queue.NotYet(until) if until is not None else None


def matched_eagerly(namespace: Namespace, kind: int, count: int = 1) -> None:
    """Count tasks handed out in the answer of the call that made them, never queued for a poll (eager
    workflow start, eager activities, the next workflow task in a completion's answer)."""
    if count:
        label = metrics.namespace_label(namespace.name)
        metrics.tasks_matched.labels(label, _KIND_LABELS.get(kind, "other"), "eager").inc(count)
