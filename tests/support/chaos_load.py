"""Load with a ledger of acknowledged operations, and the audit of that ledger against the histories.

An operation is *acknowledged* when its RPC returned OK to the client: a start (its run id), a
signal (a unique value), an activity completion (a unique result, sent through the client with the
task token the activity handed over). A failed RPC is not acknowledged: it may or may not have taken
effect, but it must never take effect twice. After the fault and the recovery, every run is told to
finish, and its history must show every acknowledged operation exactly once.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus

from tests.support.crash_workflows import ChaosWorkflow

RPC_TIMEOUT = timedelta(seconds=5)


@dataclass
class Ledger:
    started: dict[str, str] = field(default_factory=dict)
    """Acknowledged starts: workflow id -> run id."""
    signals: dict[str, list[str]] = field(default_factory=dict)
    """Acknowledged signals per workflow id."""
    completions: dict[str, list[str]] = field(default_factory=dict)
    """Acknowledged activity completions per workflow id (at most one may ever be acknowledged)."""
    failed: Counter[str] = field(default_factory=Counter)
    """RPCs that did not return OK, by kind."""

    @property
    def acknowledged(self) -> int:
        return (
            len(self.started)
            + sum(map(len, self.signals.values()))
            + sum(map(len, self.completions.values()))
        )


async def _call(ledger: Ledger, kind: str, coro) -> bool:
    try:
        await asyncio.wait_for(coro, timeout=20)
    except Exception:  # noqa: BLE001 - any failure means "not acknowledged"
        ledger.failed[kind] += 1
        return False
    return True


async def generate(
    client: Client, *, queue: str, tokens: Path, ledger: Ledger, runs: int, signals: int, seconds: float
) -> None:
    """Start `runs` runs spread over `seconds`, each then signalled `signals` times at an even pace."""

    async def one(index: int) -> None:
        await asyncio.sleep(seconds * index / runs)
        workflow_id = f"chaos-{uuid.uuid4()}"
        try:
            handle = await asyncio.wait_for(
                client.start_workflow(
                    ChaosWorkflow.run,
                    str(tokens),
                    id=workflow_id,
                    task_queue=queue,
                    task_timeout=timedelta(seconds=2),
                    rpc_timeout=RPC_TIMEOUT,
                ),
                timeout=20,
            )
        except Exception:  # noqa: BLE001
            ledger.failed["start"] += 1
            return
        ledger.started[workflow_id] = handle.result_run_id or ""
        for n in range(signals):
            await asyncio.sleep(seconds / runs)
            value = f"{workflow_id}/s{n}"
            if await _call(
                ledger, "signal", handle.signal(ChaosWorkflow.add, value, rpc_timeout=RPC_TIMEOUT)
            ):
                ledger.signals.setdefault(workflow_id, []).append(value)

    await asyncio.gather(*(one(i) for i in range(runs)))


async def complete_activities(client: Client, *, tokens: Path, ledger: Ledger, stop: asyncio.Event) -> None:
    """Complete every activity that hands over its token, each with a result unique to that token."""
    seen = 0
    pending: set[asyncio.Task] = set()

    async def complete(workflow_id: str, attempt: str, token: str) -> None:
        value = f"{workflow_id}/a{attempt}/{token[-8:]}"
        handle = client.get_async_activity_handle(task_token=bytes.fromhex(token))
        if await _call(ledger, "completion", handle.complete(value, rpc_timeout=RPC_TIMEOUT)):
            ledger.completions.setdefault(workflow_id, []).append(value)

    while not stop.is_set():
        lines = tokens.read_text().splitlines() if tokens.exists() else []
        for line in lines[seen:]:
            task = asyncio.ensure_future(complete(*line.split()))
            pending.add(task)
            task.add_done_callback(pending.discard)
        seen = len(lines)
        await asyncio.sleep(0.05)
    await asyncio.gather(*pending)


async def finish_all(client: Client, ledger: Ledger, *, timeout: float) -> dict[str, list[str]]:
    """Tell every acknowledged run to finish (retrying until it is acknowledged) and collect results."""
    results: dict[str, list[str]] = {}
    deadline = time.monotonic() + timeout

    async def one(workflow_id: str) -> None:
        handle = client.get_workflow_handle(workflow_id)
        while True:
            try:
                await handle.signal(ChaosWorkflow.finish, rpc_timeout=RPC_TIMEOUT)
                break
            except Exception:  # noqa: BLE001 - retried until the deadline; the audit names the run
                if time.monotonic() > deadline:
                    return
                await asyncio.sleep(0.5)
        try:
            results[workflow_id] = await asyncio.wait_for(
                handle.result(), timeout=max(deadline - time.monotonic(), 1)
            )
        except Exception:  # noqa: BLE001 - no result: the audit reports the run's status
            return

    await asyncio.gather(*(one(w) for w in ledger.started))
    return results


@dataclass
class Audit:
    acknowledged: int = 0
    lost: list[str] = field(default_factory=list)
    """Acknowledged operations missing from the histories (or a run missing altogether)."""
    duplicated: list[str] = field(default_factory=list)
    """Operations that took effect more than once."""
    wrong_results: list[str] = field(default_factory=list)
    timer_lateness: list[float] = field(default_factory=list)
    """Seconds from due to fired of each run's user timer."""

    def summary(self, ledger: Ledger) -> str:
        failed = ", ".join(f"{k} {v}" for k, v in sorted(ledger.failed.items())) or "none"
        return (
            f"lost {len(self.lost)} of {self.acknowledged} acknowledged operations "
            f"({len(ledger.started)} starts, {sum(map(len, ledger.signals.values()))} signals, "
            f"{sum(map(len, ledger.completions.values()))} activity completions), duplicated "
            f"{len(self.duplicated)}, wrong results {len(self.wrong_results)}; timer lateness max "
            f"{max(self.timer_lateness, default=0):.1f}s; RPCs refused or failed: {failed}"
        )


def _payload(payloads) -> str:
    return json.loads(payloads.payloads[0].data) if payloads.payloads else ""


async def audit(client: Client, ledger: Ledger, results: dict[str, list[str]]) -> Audit:
    """Check the ledger against each run's history and result."""
    report = Audit(acknowledged=ledger.acknowledged)

    async def one(workflow_id: str, run_id: str) -> None:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        try:
            history = [e async for e in handle.fetch_history_events()]
        except Exception as e:  # noqa: BLE001
            report.lost.append(f"start {workflow_id}/{run_id}: {e}")
            return
        signalled = Counter(
            _payload(e.workflow_execution_signaled_event_attributes.input)
            for e in history
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
            and e.workflow_execution_signaled_event_attributes.signal_name == "add"
        )
        completed = [
            _payload(e.activity_task_completed_event_attributes.result)
            for e in history
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        ]
        for value in ledger.signals.get(workflow_id, []):
            if signalled[value] == 0:
                report.lost.append(f"signal {value}")
        report.duplicated += [f"signal {v} x{n}" for v, n in signalled.items() if n > 1]
        acked = ledger.completions.get(workflow_id, [])
        if len(acked) > 1:
            report.duplicated.append(f"completions of one activity acknowledged {len(acked)} times: {acked}")
        if acked and acked[-1] not in completed:
            report.lost.append(f"completion {acked[-1]} (history has {completed})")
        if len(completed) != 1:
            report.duplicated.append(f"{workflow_id}: {len(completed)} ActivityTaskCompleted")
        started = {
            e.timer_started_event_attributes.timer_id: e.event_time.ToNanoseconds()
            + e.timer_started_event_attributes.start_to_fire_timeout.ToNanoseconds()
            for e in history
            if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
        }
        report.timer_lateness += [
            (e.event_time.ToNanoseconds() - started[e.timer_fired_event_attributes.timer_id]) / 1e9
            for e in history
            if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED
            and e.timer_fired_event_attributes.timer_id in started
        ]
        description = await handle.describe()
        expected = [
            *completed[:1],
            *(
                _payload(e.workflow_execution_signaled_event_attributes.input)
                for e in history
                if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
                and e.workflow_execution_signaled_event_attributes.signal_name == "add"
            ),
        ]
        if description.status != WorkflowExecutionStatus.COMPLETED or results.get(workflow_id) != expected:
            report.wrong_results.append(
                f"{workflow_id}: {description.status} result {results.get(workflow_id)} expected {expected}"
            )

    await asyncio.gather(*(one(w, r) for w, r in ledger.started.items()))
    return report
