"""Which shards a shard loop owns: its share of the leases, held from one pass to the next (rule 4).

Every loop (`perdura dev`'s, and one per `perdura worker`) says it is alive in `engine_shardowner` each time
it renews its leases, and holds the shard count over the number of loops alive, rounded up: a loop that
holds more lets the extra shards go, one that holds fewer takes free ones. A loop that stops lets its
leases go and leaves; one that dies is forgotten, and its leases lapse, within a lease's time. A shard
nobody holds is still processed: beat's sweep queues a Celery pass for it (engine/tasks.py).
"""

from __future__ import annotations

import logging
import math
from datetime import timedelta

from django.conf import settings
from django.db import connection
from perdura import clock

from engine.models import ShardOwner
from engine.persistence import leases

log = logging.getLogger("perdura.shards")

SHORT_ROUND_SECONDS = 1.0
"""How soon a loop that holds other than its share looks again: one with more lets the extra go, one with
fewer takes free shards (a loop that joined, or one whose peers are letting shards go)."""


def share(shards: int, loops: int) -> int:
    """How many shards each of `loops` live loops holds at most."""
    return math.ceil(shards / max(loops, 1))


def heartbeat(owner: str, ttl: float) -> int:
    """Say `owner` is alive; returns how many loops are (seen within `ttl`, `owner` included)."""
    now = clock.now()
    at = connection.ops.adapt_datetimefield_value(now)
    since = connection.ops.adapt_datetimefield_value(now - timedelta(seconds=ttl))
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO engine_shardowner (name, seen_at) VALUES (%s, %s) "
            "ON CONFLICT (name) DO UPDATE SET seen_at = EXCLUDED.seen_at",
            [owner, at],
        )
        cursor.execute("SELECT COUNT(*) FROM engine_shardowner WHERE seen_at > %s", [since])
        (alive,) = cursor.fetchone()
    return max(int(alive), 1)


def leave(owner: str) -> None:
    ShardOwner.objects.filter(name=owner).delete()


class Ownership:
    """The leases a shard loop holds, renewed a third of the way through their time. Taking and releasing
    a lease for every pass cost two commits per shard with work; the fence is the same (every write checks
    the range_id held)."""

    def __init__(self, owner: str, shards: range) -> None:
        self.owner = owner
        self.shards = shards
        self.held: dict[int, int] = {}
        self._round_at = 0.0

    def refresh(self, now: float) -> None:
        """On a database thread, at most once a round: renew the leases held, let go of those over the
        share, take free ones up to it."""
        if now < self._round_at:
            return
        ttl = settings.PERDURA_SHARD_LEASE_SECONDS
        most = share(len(self.shards), heartbeat(self.owner, ttl))
        self.held = leases.renew(self.owner, self.held, ttl)
        for shard in sorted(self.held, reverse=True)[: max(len(self.held) - most, 0)]:
            leases.release(shard, self.held.pop(shard))
        if len(self.held) < most:
            for shard in leases.free(self.shards, self.owner):
                if len(self.held) >= most:
                    break
                if shard in self.held:
                    continue
                range_id = leases.acquire(shard, self.owner, ttl)
                if range_id is not None:
                    self.held[shard] = range_id
        self._round_at = now + (ttl / 3 if len(self.held) == most else min(SHORT_ROUND_SECONDS, ttl / 3))

    def lost(self, shard: int) -> None:
        """A write found the shard's lease taken over: it is another's now."""
        self.held.pop(shard, None)
        self._round_at = 0.0

    def release_all(self) -> None:
        """Let every lease go and leave, so that the other loops take the shards at their next round."""
        for shard, range_id in sorted(self.held.items()):
            leases.release(shard, range_id)
        self.held.clear()
        leave(self.owner)
