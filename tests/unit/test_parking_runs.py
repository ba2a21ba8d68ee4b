"""Parking a run whose workflow retries are exhausted (engine/history/parking.py, lifecycle/chain.py)."""

from __future__ import annotations

import json

from temporalio.api.common.v1 import Header, Payload, RetryPolicy, SearchAttributes
from temporalio.api.enums.v1 import ContinueAsNewInitiator, RetryState
from temporalio.api.history.v1 import WorkflowExecutionFailedEventAttributes
from temporalio.api.workflowservice.v1 import RespondWorkflowTaskCompletedRequest

from engine.history import completion, parking
from engine.history.mutation import Mutation
from engine.history.state import PAUSED
from tests.unit.history_harness import Run, dur, fail_workflow, start_request


def _json(value: object) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(value).encode())


def _run(choice: str | None, *, maximum_attempts: int = 1, cron: str = "") -> Run:
    request = start_request()
    request.retry_policy.CopyFrom(RetryPolicy(maximum_attempts=maximum_attempts, initial_interval=dur(1)))
    request.cron_schedule = cron
    if choice is not None:
        request.header.CopyFrom(Header(fields={parking.HEADER: _json(choice)}))
    return Run(request)


def _fail(run: Run, *, namespace_parks: bool = False, non_retryable: bool = False) -> Mutation:
    """The worker fails the run's attempt; returns the change that closed it."""
    run.start_wft(1.0)
    scheduled_id, started_id, attempt = run.wft_token()
    command = fail_workflow("ledger closed")
    if non_retryable:
        failure = command.fail_workflow_execution_command_attributes.failure
        failure.application_failure_info.non_retryable = True

    def complete(m: Mutation, **kwargs) -> None:
        m.park_on_exhausted = namespace_parks
        completion.complete(m, **kwargs)

    run.apply(
        1.5,
        complete,
        scheduled_event_id=scheduled_id,
        started_event_id=started_id,
        attempt=attempt,
        request=RespondWorkflowTaskCompletedRequest(commands=[command], identity="worker"),
    )
    return run.last


def _failed(m: Mutation) -> WorkflowExecutionFailedEventAttributes:
    (event,) = [e for e in m.events if e.HasField("workflow_execution_failed_event_attributes")]
    return event.workflow_execution_failed_event_attributes


def _parked_types(search_attributes: bytes) -> list[str] | None:
    fields = SearchAttributes.FromString(search_attributes).indexed_fields
    return json.loads(fields[parking.ATTRIBUTE].data) if parking.ATTRIBUTE in fields else None


def test_the_last_attempt_fails_into_a_paused_run_with_fresh_attempts():
    closed = _fail(_run("park"))
    attrs = _failed(closed)
    assert attrs.retry_state == RetryState.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED
    assert attrs.failure.message == "ledger closed"
    parked = closed.continued
    assert parked is not None
    assert attrs.new_execution_run_id == parked.state.run_id
    assert parked.state.status == PAUSED
    assert parked.state.pause is not None
    assert parked.state.pause.identity == parking.IDENTITY
    assert parked.state.pause.reason.startswith(
        "parked after 1 attempt, retries exhausted (last failure: ledger"
    )
    assert parked.state.attempt == 1
    # A first workflow task may be scheduled, as for any paused run; none is handed out before the redrive.
    assert parked.state.workflow_task is None or not parked.state.workflow_task.started_event_id
    started = parked.events[0].workflow_execution_started_event_attributes
    assert started.initiator == ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_RETRY
    assert started.continued_failure.message == "ledger closed"
    assert _parked_types(parked.state.search_attributes) == ["MyWorkflow"]


def test_without_park_the_run_fails_as_in_temporal():
    for run in (_run(None), _run("fail")):
        closed = _fail(run)
        attrs = _failed(closed)
        assert attrs.retry_state == RetryState.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED
        assert not attrs.new_execution_run_id
        assert closed.continued is None


def test_the_namespace_default_parks_and_the_header_overrides_it():
    assert _fail(_run(None), namespace_parks=True).continued is not None
    assert _fail(_run("fail"), namespace_parks=True).continued is None


def test_a_non_retryable_failure_is_not_parked():
    closed = _fail(_run("park"), non_retryable=True)
    assert closed.continued is None


def test_retries_left_are_spent_before_parking():
    closed = _fail(_run("park", maximum_attempts=2))
    assert closed.continued is not None
    assert closed.continued.state.pause is None
    assert closed.continued.state.attempt == 2


def test_a_cron_chain_goes_on_to_its_next_run():
    closed = _fail(_run("park", cron="*/5 * * * *"))
    assert closed.continued is not None
    assert closed.continued.state.pause is None
