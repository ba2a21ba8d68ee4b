"""Shard leases with a fencing number (DESIGN.md rule 4).

A lease is held only while a worker processes a shard's due timers; taking it bumps `range_id`.
Every write the processor makes re-reads `range_id` inside its own transaction (FOR SHARE on
Postgres, so a concurrent steal waits for it) and gives up if it changed: two workers that both
believe they own a shard can never both commit.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from perdura import clock

from engine.models import ShardLease

LEASE_SECONDS = 30.0
"""The default of PERDURA_SHARD_LEASE_SECONDS."""


class LeaseLost(Exception):
    """Another worker took the shard: stop processing it."""


def acquire(shard: int, owner: str, ttl: float | None = None) -> int | None:
    """Take the shard's lease (bumping range_id) unless another owner holds a live one; returns range_id."""
    ttl = getattr(settings, "PERDURA_SHARD_LEASE_SECONDS", LEASE_SECONDS) if ttl is None else ttl
    now = clock.now()
    with transaction.atomic():
        ShardLease.objects.bulk_create([ShardLease(shard=shard)], ignore_conflicts=True)
        lease = ShardLease.objects.select_for_update().get(shard=shard)
        if lease.owner and lease.owner != owner and lease.expires_at is not None and lease.expires_at > now:
            return None
        lease.owner = owner
        lease.range_id += 1
        lease.expires_at = now + timedelta(seconds=ttl)
        lease.save(update_fields=["owner", "range_id", "expires_at"])
        return lease.range_id


def release(shard: int, range_id: int) -> None:
    """Let the lease go early (only if still ours), so the next wake-up anywhere can take it at once."""
    ShardLease.objects.filter(shard=shard, range_id=range_id).update(owner="", expires_at=clock.now())


def check(shard: int, range_id: int) -> None:
    """Inside a transaction: fail unless `range_id` is still the shard's. Holds a share lock until commit."""
    with connection.cursor() as cursor:
        suffix = " FOR SHARE" if connection.vendor == "postgresql" else ""
        cursor.execute(f"SELECT range_id FROM engine_shardlease WHERE shard = %s{suffix}", [shard])
        row = cursor.fetchone()
    if row is None or row[0] != range_id:
        raise LeaseLost(f"shard {shard} lease moved on (ours {range_id}, now {row[0] if row else None})")
