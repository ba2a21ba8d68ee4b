"""Bounded waits of the long-polling RPCs: a deadline within the caller's, and the task queue long poll."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
from perdura import clock

from engine import dbthreads, notify
from engine.matching import queue
from tenants.models import Namespace

LONG_POLL_SECONDS = 60.0
RECHECK_SECONDS = 5.0
"""A waiter re-reads at least this often: wake-ups are hints, and one may be lost."""


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
) -> Any:
    """Claim a task now or when one arrives, until about a minute passes (then None: an empty answer)."""
    loop = asyncio.get_running_loop()
    until = deadline(context, LONG_POLL_SECONDS)
    with notify.hub.waiter(notify.task_queue_key(namespace.id, kind, task_queue)) as waiter:
        while True:
            outcome = await dbthreads.run(poll_once)
            if not isinstance(outcome, queue.NotYet):
                return outcome
            wait = RECHECK_SECONDS
            if outcome.visible_at is not None:
                wait = min(max((outcome.visible_at - clock.now()).total_seconds(), 0.01), wait)
            remaining = until - loop.time()
            if remaining <= 0:
                return None
            await waiter.wait(min(remaining, wait))
            waiter.rearm()
