"""What each kind of timer row does when it comes due: one rule per TimerKind."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from engine.history import activity, lifecycle, timer, workflow_task
from engine.history.mutation import Mutation, TimerKind

FireRule = Callable[..., None]
"""Called as rule(m, event_id=..., attempt=..., detail=...) with the row's fields; raises StaleTask when
the row no longer matters."""


def _user_timer(m: Mutation, *, event_id: int, attempt: int, detail: int) -> None:
    timer.fire(m, started_event_id=event_id)


def _workflow_task_timeout(m: Mutation, *, event_id: int, attempt: int, detail: int) -> None:
    workflow_task.time_out(m, scheduled_event_id=event_id, attempt=attempt)


def _activity_timeout(m: Mutation, *, event_id: int, attempt: int, detail: int) -> None:
    activity.time_out(m, scheduled_event_id=event_id, attempt=attempt, timeout_type=detail)


def _workflow_task_schedule_to_start(m: Mutation, *, event_id: int, attempt: int, detail: int) -> None:
    workflow_task.schedule_to_start_timeout(m, scheduled_event_id=event_id, attempt=attempt)


def _workflow_backoff(m: Mutation, *, event_id: int, attempt: int, detail: int) -> None:
    lifecycle.backoff_elapsed(m)


def _workflow_run_timeout(m: Mutation, *, event_id: int, attempt: int, detail: int) -> None:
    lifecycle.run_timeout(m)


RULES: Mapping[int, FireRule] = MappingProxyType(
    {
        TimerKind.USER_TIMER: _user_timer,
        TimerKind.WORKFLOW_TASK_TIMEOUT: _workflow_task_timeout,
        TimerKind.ACTIVITY_TIMEOUT: _activity_timeout,
        TimerKind.WORKFLOW_TASK_SCHEDULE_TO_START: _workflow_task_schedule_to_start,
        TimerKind.WORKFLOW_BACKOFF: _workflow_backoff,
        TimerKind.WORKFLOW_RUN_TIMEOUT: _workflow_run_timeout,
    }
)
