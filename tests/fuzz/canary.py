"""The canary: a run in a namespace the fuzz never names, taking 1-second timers while the fuzz runs.

How late each timer fired is read from its history afterwards (TimerFired time - TimerStarted time - 1 s):
the server's own clock on both ends, so a busy test process cannot blur the figure.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow


@workflow.defn
class CanaryWorkflow:
    def __init__(self) -> None:
        self.stop = False

    @workflow.signal
    def finish(self) -> None:
        self.stop = True

    @workflow.run
    async def run(self, limit: int) -> int:
        fired = 0
        while not self.stop and fired < limit:
            await asyncio.sleep(1)
            fired += 1
        return fired


async def timer_lateness(handle) -> list[float]:
    """Seconds each 1-second timer of the run fired late, in order."""
    from temporalio.api.enums.v1 import EventType

    started: dict[int, float] = {}
    late = []
    async for event in handle.fetch_history_events():
        at = event.event_time.ToDatetime().timestamp()
        if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
            started[event.event_id] = at
        elif event.event_type == EventType.EVENT_TYPE_TIMER_FIRED:
            begun = started.get(event.timer_fired_event_attributes.started_event_id)
            if begun is not None:
                late.append(at - begun - 1.0)
    return late
