"""Celery tasks of the shard workers: thin wrappers that take ids and call the shard code (idempotent)."""

from __future__ import annotations

from celery import shared_task

from engine.shards import timers
from engine.shards.loop import owner_name


@shared_task(name="engine.tasks.process_shard", ignore_result=True)
def process_shard(shard: int) -> int:
    """Fire the shard's due timers. Sent with an ETA when a timer is created, and by the sweep."""
    return timers.process_shard(shard, owner_name())


@shared_task(name="engine.tasks.sweep", ignore_result=True)
def sweep() -> int:
    """Beat's safety net: queue every shard with due timers, so a lost wake-up only delays a timer."""
    shards = timers.due_shards()
    for shard in shards:
        process_shard.delay(shard)
    return len(shards)
