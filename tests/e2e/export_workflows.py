"""Workflows of tests/e2e/test_run_export.py (a module of their own, as the SDK's sandbox wants)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from tests.e2e.workflows import HelloWorkflow, greet


@workflow.defn
class AuditedWorkflow:
    """First run: an activity, waits for a signal and an update, runs a child, then continues as new;
    the second run returns at once."""

    def __init__(self) -> None:
        self.approved = ""
        self.notes: list[str] = []

    @workflow.signal
    def approve(self, who: str) -> None:
        self.approved = who

    @workflow.update
    async def note(self, text: str) -> int:
        self.notes.append(text)
        return len(self.notes)

    @workflow.run
    async def run(self, generation: int) -> str:
        if generation > 0:
            return f"generation {generation}"
        greeting = await workflow.execute_activity(
            greet, "auditor", start_to_close_timeout=timedelta(seconds=10)
        )
        await workflow.wait_condition(lambda: bool(self.approved) and bool(self.notes))
        child = await workflow.execute_child_workflow(
            HelloWorkflow.run, "child", id=f"{workflow.info().workflow_id}-child"
        )
        workflow.continue_as_new(args=[generation + 1])
        return greeting + child  # not reached


@workflow.defn
class ManySignalsWorkflow:
    """Takes `tick` signals (one event each, plus the workflow tasks they wake) until `stop`; returns the
    count (bench/run_export.py grows a 10,000-event history with it)."""

    def __init__(self) -> None:
        self.seen = 0
        self.stopped = False

    @workflow.signal
    def tick(self, n: int) -> None:
        self.seen += 1

    @workflow.signal
    def stop(self) -> None:
        self.stopped = True

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self.stopped)
        return self.seen


EXPORT_WORKFLOWS = [AuditedWorkflow, ManySignalsWorkflow, HelloWorkflow]
EXPORT_ACTIVITIES = [greet]
