"""Which shards a shard loop owns: its share of the leases, held from one pass to the next (rule 4).

Every loop (`perdura dev`'s, and those of each `perdura worker`) says it is alive in `engine_shardowner`
each time it renews its leases, and holds its share (`share`: the shard count over the number of loops
alive, rounded up, while loops are no more than shards): a loop that holds more lets the extra shards go,
one that holds fewer takes free ones. A loop that stops lets its leases go and leaves; one that dies is
forgotten, and its leases lapse, within a lease's time. A shard nobody holds is still processed: beat's
sweep queues a Celery pass for it (engine/tasks.py).
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
"""How soon a loop that holds other than its share looks again (one with more lets the extra go, one with
fewer takes free shards: a loop that joined, or one whose peers are letting shards go), and how often a loop
with no share looks at all."""


def share(shards: int, owner: str, alive: list[str]) -> int:
    """How many shards `owner` holds at most among the live loops `alive` (itself included).

    With no more loops than shards, each holds the shard count over the loops, rounded up. With more (two
    workers of 16 loops for 16 shards), the first `shards` loops by `rank` hold one each and the others
    none: the rank takes every worker's first loop, then every worker's second, and so on, so each worker
    holds its part. Counted over loops alone, the first worker's loops kept one shard each, every shard,
    and a second worker's held none."""
    loops = max(len(alive), 1)
    if loops <= shards:
        return math.ceil(shards / loops)
    ranked = sorted(set(alive) | {owner}, key=rank)
    return 1 if ranked.index(owner) < shards else 0


def rank(owner: str) -> tuple[int, str]:
    """A loop's place in the order shards are shared in when loops outnumber them: its index within its
    worker (`host:pid:worker/3`), then its worker's name."""
    worker, _, index = owner.rpartition("/")
    return (int(index), worker) if worker and index.isdigit() else (0, owner)


def heartbeat(owner: str, ttl: float) -> list[str]:
    """Say `owner` is alive; returns the loops that are (seen within `ttl`, `owner` included)."""
    now = clock.now()
    at = connection.ops.adapt_datetimefield_value(now)
    since = connection.ops.adapt_datetimefield_value(now - timedelta(seconds=ttl))
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO engine_shardowner (name, seen_at) VALUES (%s, %s) "
            "ON CONFLICT (name) DO UPDATE SET seen_at = EXCLUDED.seen_at",
            [owner, at],
        )
        cursor.execute("SELECT name FROM engine_shardowner WHERE seen_at > %s", [since])
        alive = [name for (name,) in cursor.fetchall()]
    return alive if owner in alive else [*alive, owner]


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
        most = share(len(self.shards), self.owner, heartbeat(self.owner, ttl))
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
        # A loop with no share (more loops than shards) stands by: it looks every short round, so that it
        # takes a stopped worker's shards within a second or two.
        settled = len(self.held) == most and most > 0
        self._round_at = now + (ttl / 3 if settled else min(SHORT_ROUND_SECONDS, ttl / 3))

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
