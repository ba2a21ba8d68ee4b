"""Park-and-redrive (beyond Temporal): an activity or run whose retries are exhausted is parked instead of failed.

A run parks as the next run of its chain, started paused (lifecycle/chain.park_run): its last attempt
closes as Temporal closes it, the caller's result() follows the chain to the parked run, and an unpause
redrives it with every attempt again. What follows is about activities.

A parked activity is a paused one (activity_control.pause's state: no new attempt is dispatched, no
timeout runs) with the identity `perdura-park` and a reason saying why, so DescribeWorkflowExecution
shows it as paused and every operator control of paused activities applies to it. The run stays
open, with no event written (as a pause writes none). The `PerduraParked` search attribute lists the
types of the run's parked activities, so `PerduraParked IS NOT NULL` or `PerduraParked = 'charge'`
finds them.

Redrive is Temporal's own controls: `temporal activity reset` (attempts back to 1, unpaused) or
`temporal activity unpause --reset-attempts`, one run at a time or in bulk by list query (the
reset-activities and unpause-activities batch operations).

Only exhausted attempts park (retry state MAXIMUM_ATTEMPTS_REACHED): a non-retryable failure is the
application's deliberate answer, and a schedule-to-close timeout has no time left for another attempt.

Where the choice comes from: the `perdura-on-retries-exhausted` header of the activity (its
ScheduleActivityTask command; a JSON string, "park" or "fail"), else the namespace's default
(`perdura namespace update --on-retries-exhausted park`). Temporal's RetryPolicy has no such field;
a header is what every official SDK can send per call today, as for `perdura-retry-jitter`.
"""

from __future__ import annotations

import json

from temporalio.api.common.v1 import Header, Payload, SearchAttributes

from engine.history import pause_info
from engine.history.mutation import Mutation
from engine.history.state import ActivityInfo, MutableState

HEADER = "perdura-on-retries-exhausted"
ATTRIBUTE = pause_info.PARKED
IDENTITY = "perdura-park"
CHOICES = ("park", "fail")


def _read(header: Header | None) -> str | None:
    """The header's choice ("park" or "fail"), None without one; raises ValueError when it is invalid."""
    if header is None or HEADER not in header.fields:
        return None
    payload = header.fields[HEADER]
    message = f'the {HEADER} header must be the JSON string "park" or "fail"'
    if payload.metadata.get("encoding", b"") != b"json/plain":
        raise ValueError(message)
    try:
        value = json.loads(payload.data)
    except ValueError:
        value = None
    if value not in CHOICES:
        raise ValueError(message)
    return str(value)


def header_problem(header: Header | None) -> str | None:
    """What is wrong with a `perdura-on-retries-exhausted` header, for the command that carries it."""
    try:
        _read(header)
    except ValueError as e:
        return str(e)
    return None


def parks(header: Header | None, namespace_default: bool) -> bool:
    """Whether an activity with this header parks when its retries are exhausted.

    The header overrides the namespace default both ways; an invalid one stored before the check
    (header_problem) leaves the namespace default in force.
    """
    try:
        choice = _read(header)
    except ValueError:
        choice = None
    return namespace_default if choice is None else choice == "park"


def is_parked(info: ActivityInfo) -> bool:
    return info.paused and info.pause_identity == IDENTITY


def reason(attempts: int, failure_message: str, *, redrive: str = "a reset") -> str:
    """The pause reason a parked activity or run shows: why it stopped and how to send it on."""
    cause = failure_message[:200] or "no message"
    counted = f"{attempts} attempt" + ("" if attempts == 1 else "s")
    return f"parked after {counted}, retries exhausted (last failure: {cause}); redrive with {redrive}"


def is_parked_run(state: MutableState) -> bool:
    """The run itself is parked: the paused continuation of a run whose workflow retries ran out."""
    return state.pause is not None and state.pause.identity == IDENTITY


def reindex(m: Mutation) -> None:
    """After an activity was paused, parked, unpaused, reset or closed: set `TemporalPauseInfo` (its
    `property:activityType=` entries, as Temporal keeps them for paused activities) and `PerduraParked`,
    and have visibility written again when they changed (no event tells it). A standalone activity's
    run is listed as the activity, whose own pause state describe shows: it gets neither."""
    if m.state.standalone is not None:
        return
    before = m.state.search_attributes
    pause_info.index(m.state)
    index(m.state)
    if m.state.search_attributes != before:
        m.search_attributes_changed = True


def index(state: MutableState) -> bool:
    """Set `PerduraParked` to the sorted types of what is parked in the run: its parked activities, and its
    own workflow type while the run itself is parked (absent when nothing is).

    Returns whether the run's search attributes changed.
    """
    parked = {info.activity_type for info in state.activities.values() if is_parked(info)}
    if is_parked_run(state):
        parked.add(state.workflow_type)
    types = sorted(parked)
    attributes = (
        SearchAttributes.FromString(state.search_attributes)
        if state.search_attributes
        else SearchAttributes()
    )
    before = attributes.indexed_fields.get(ATTRIBUTE)
    if types:
        value = Payload(
            metadata={"encoding": b"json/plain", "type": b"KeywordList"},
            data=json.dumps(types, separators=(",", ":"), ensure_ascii=False).encode(),
        )
        if before == value:
            return False
        attributes.indexed_fields[ATTRIBUTE].CopyFrom(value)
    elif before is None:
        return False
    else:
        attributes.indexed_fields.pop(ATTRIBUTE)
    state.search_attributes = attributes.SerializeToString() if attributes.indexed_fields else b""
    return True
