"""Many user timers, cheaply: raw RPCs start runs and answer each first workflow task with a batch of
StartTimer commands due at one instant; the histories are then read back and checked timer by timer.

No SDK worker replays these runs: after the timers fire nobody polls, so the only work the server
does is the firing itself, which is what the chaos tests measure.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

from google.protobuf.duration_pb2 import Duration
from temporalio.api.command.v1 import Command, StartTimerCommandAttributes
from temporalio.api.common.v1 import WorkflowExecution, WorkflowType
from temporalio.api.enums.v1 import CommandType, EventType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    GetWorkflowExecutionHistoryRequest,
    PollWorkflowTaskQueueRequest,
    RespondWorkflowTaskCompletedRequest,
    StartWorkflowExecutionRequest,
)
from temporalio.client import Client


def _nanos(ts) -> int:
    return ts.seconds * 1_000_000_000 + ts.nanos


async def start_timer_runs(
    client: Client, *, runs: int, timers_per_run: int, due_at: float, concurrency: int = 8
) -> list[str]:
    """Start `runs` runs, each answering its first workflow task with `timers_per_run` StartTimer
    commands due at the epoch second `due_at` (each duration is computed just before the answer, so
    all fire within a few milliseconds of it). Returns the workflow ids."""
    service = client.workflow_service
    queue = f"chaos-timers-{uuid.uuid4()}"
    ids = [f"chaos-timers-{uuid.uuid4()}" for _ in range(runs)]
    starts = asyncio.Semaphore(concurrency)

    async def start(workflow_id: str) -> None:
        async with starts:
            await service.start_workflow_execution(
                StartWorkflowExecutionRequest(
                    namespace=client.namespace,
                    workflow_id=workflow_id,
                    workflow_type=WorkflowType(name="ChaosTimers"),
                    task_queue=TaskQueue(name=queue),
                    request_id=str(uuid.uuid4()),
                    identity="chaos",
                )
            )

    await asyncio.gather(*(start(w) for w in ids))

    async def answer_one() -> None:
        task = await service.poll_workflow_task_queue(
            PollWorkflowTaskQueueRequest(
                namespace=client.namespace, task_queue=TaskQueue(name=queue), identity="chaos"
            )
        )
        if not task.task_token:
            raise RuntimeError("a workflow task poll came back empty")
        # Whole microseconds: the server keeps times to the microsecond, so a nanosecond remainder
        # would read as a sub-microsecond early fire.
        micros = round(max(due_at - time.time(), 0.0) * 1_000_000)
        delay = Duration(seconds=micros // 1_000_000, nanos=micros % 1_000_000 * 1000)
        commands = [
            Command(
                command_type=CommandType.COMMAND_TYPE_START_TIMER,
                start_timer_command_attributes=StartTimerCommandAttributes(
                    timer_id=f"t{i}", start_to_fire_timeout=delay
                ),
            )
            for i in range(timers_per_run)
        ]
        await service.respond_workflow_task_completed(
            RespondWorkflowTaskCompletedRequest(
                namespace=client.namespace, task_token=task.task_token, commands=commands, identity="chaos"
            )
        )

    pending = runs
    while pending:
        batch = min(pending, concurrency)
        await asyncio.gather(*(answer_one() for _ in range(batch)))
        pending -= batch
    return ids


@dataclass
class TimerAudit:
    """What the histories say about a set of timers."""

    started: int = 0
    fired: int = 0
    lost: int = 0
    """Started and never fired."""
    duplicated: int = 0
    """Fired more than once."""
    early: int = 0
    """Fired before their start time plus their duration."""
    lateness: list[float] = field(default_factory=list)
    """Seconds from due to fired, per fire."""
    fired_at: list[int] = field(default_factory=list)
    """Each TimerFired event's time (ns since the epoch)."""

    def percentile(self, p: float) -> float:
        if not self.lateness:
            return float("nan")
        ordered = sorted(self.lateness)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]

    def summary(self) -> str:
        return (
            f"{self.fired} fired of {self.started} started, lost {self.lost}, duplicated {self.duplicated}, "
            f"early {self.early}; lateness p50 {self.percentile(50):.2f}s p99 {self.percentile(99):.2f}s "
            f"max {max(self.lateness, default=float('nan')):.2f}s"
        )


async def audit_timers(client: Client, workflow_ids: list[str], *, concurrency: int = 8) -> TimerAudit:
    """Read every run's history and check each timer: fired once, never before it was due."""
    audit = TimerAudit()
    gate = asyncio.Semaphore(concurrency)

    async def one(workflow_id: str) -> None:
        due: dict[str, int] = {}
        fired: Counter[str] = Counter()
        token = b""
        async with gate:
            while True:
                page = await client.workflow_service.get_workflow_execution_history(
                    GetWorkflowExecutionHistoryRequest(
                        namespace=client.namespace,
                        execution=WorkflowExecution(workflow_id=workflow_id),
                        next_page_token=token,
                    )
                )
                for event in page.history.events:
                    if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
                        attrs = event.timer_started_event_attributes
                        duration = attrs.start_to_fire_timeout
                        due[attrs.timer_id] = (
                            _nanos(event.event_time) + duration.seconds * 1_000_000_000 + duration.nanos
                        )
                    elif event.event_type == EventType.EVENT_TYPE_TIMER_FIRED:
                        timer_id = event.timer_fired_event_attributes.timer_id
                        fired[timer_id] += 1
                        at = _nanos(event.event_time)
                        audit.fired_at.append(at)
                        if timer_id in due:
                            audit.lateness.append((at - due[timer_id]) / 1e9)
                            audit.early += at < due[timer_id]
                token = page.next_page_token
                if not token:
                    break
        audit.started += len(due)
        audit.fired += sum(fired.values())
        audit.lost += sum(1 for t in due if fired[t] == 0)
        audit.duplicated += sum(1 for n in fired.values() if n > 1)

    await asyncio.gather(*(one(w) for w in workflow_ids))
    return audit
