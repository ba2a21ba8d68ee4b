"""The shard loops of a `perdura worker` (its second child beside the Celery worker): each holds its share of
the shards and fires their timers when due (engine/shards/loop.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from perdura import bootstrap


def run() -> None:
    """The worker's shard loops (PERDURA_SHARD_LOOPS): each holds its share of the shards and fires their
    timers when due, woken by the wake-ups other processes NOTIFY (engine/shards/loop.py)."""
    os.environ["PGAPPNAME"] = "perdura-worker-shards"
    # The loops' threads wait on Postgres most of the time; each statement's answer waited for the GIL up
    # to the 5 ms default switch interval while another thread ran Python (bench/latency.py, 10 timers:
    # p99 32-35 ms at 5 ms, 21 ms at 0.5 ms).
    sys.setswitchinterval(0.0005)
    bootstrap.setup()
    from perdura import tracing

    tracing.configure("perdura-worker")
    from django.conf import settings

    from engine import dbthreads, notify
    from engine.api.listener import start_listener
    from engine.shards import budget, ownership
    from engine.shards.loop import WORKER_EARLY_SECONDS, run_timer_loop, worker_owner_name
    from perdura import heap, shutdown

    loops = max(settings.PERDURA_SHARD_LOOPS, 1)

    async def main() -> None:
        dbthreads.configure(loops)  # each loop runs one turn at a time
        start_listener(notify.SHARD_CHANNEL)
        heap.freeze_startup_objects()
        stop = asyncio.Event()

        def request_stop() -> None:
            if not stop.is_set():
                budget.stop_requested.set()  # a pass ends after the row in hand
                stop.set()
                shutdown.arm_watchdog("the shard loop")

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, request_stop)
        owner = worker_owner_name()
        # All the loops say they are alive before any takes shards, so that the first does not take them
        # all and let most go again a round later.
        for i in range(loops):
            await dbthreads.run(ownership.heartbeat, f"{owner}/{i}", settings.PERDURA_SHARD_LEASE_SECONDS)
        await asyncio.gather(
            *(
                run_timer_loop(stop, owner=f"{owner}/{i}", purge=False, early=WORKER_EARLY_SECONDS)
                for i in range(loops)
            )
        )

    asyncio.run(main())
