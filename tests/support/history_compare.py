"""Turn an event history into a form that can be compared across servers (Perdura vs the real Temporal).

`normalize(events)` keeps, for every event in order: its event id, its type, its attributes as the proto
JSON dict (camelCase, as `temporal workflow show -o json` prints it) and any other event-level field. It
then drops, recursively, only the fields that legitimately differ between two servers or two runs:

- when and by whom: `eventTime`, `taskId`, `workflowExecutionExpirationTime`, `identity`, `requestId`;
- run ids (`runId`, `originalExecutionRunId`, `firstExecutionRunId`, ...) and namespace ids, which are random;
- worker/SDK bookkeeping: `workerVersion`, `binaryChecksum` (the SDK reports its build id as one or the
  other, depending on the server's `buildIdBasedVersioning` capability), `sdkMetadata`,
  `meteringMetadata`, `historySizeBytes`, `buildIdRedirectCounter`, and failure `stackTrace`s;
- the task queue of WorkflowTaskScheduled events: the real server schedules later workflow tasks on the
  worker's sticky queue, Perdura (no sticky execution yet) on the normal one.

Everything else stays, so a different event order, a missing or extra event, a wrong event-id reference
(scheduledEventId, startedEventId, workflowTaskCompletedEventId, ...), a wrong attempt, retry state,
timeout type, failure message/type/cause, timer id, signal name, activity id/type or result payload is a
difference. Payloads are decoded to text (`{"encoding": ..., "data": ...}`) to make diffs readable.
"""

from __future__ import annotations

import base64
import difflib
import json
from collections.abc import Iterable
from typing import Any

from google.protobuf.json_format import MessageToDict
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

IGNORED_FIELDS = frozenset(
    {
        "eventTime",
        "taskId",
        "identity",
        "requestId",
        "runId",
        "originalExecutionRunId",
        "firstExecutionRunId",
        "continuedExecutionRunId",
        "newExecutionRunId",
        "baseRunId",  # a reset's WorkflowTaskFailed names the base and the new run
        "newRunId",
        "workflowExecutionExpirationTime",
        "workerVersion",
        "binaryChecksum",
        "sdkMetadata",
        "meteringMetadata",
        "historySizeBytes",
        "buildIdRedirectCounter",
        "stackTrace",
        "namespaceId",  # each server makes its own namespace ids
        # update ids are made by each client at random (the message id is derived from them)
        "updateId",
        "protocolInstanceId",
        "acceptedRequestMessageId",
        # build-id based auto-reset points: Perdura does not implement reset points yet
        "prevAutoResetPoints",
    }
)
# Per event type, attributes that differ legitimately for that type only.
IGNORED_PER_TYPE = {
    "WorkflowTaskScheduled": frozenset({"taskQueue"}),
}


_TIMED_INITIATORS = {"CONTINUE_AS_NEW_INITIATOR_WORKFLOW", "CONTINUE_AS_NEW_INITIATOR_RETRY"}


def _type_name(event_type: int) -> str:
    """EVENT_TYPE_ACTIVITY_TASK_SCHEDULED -> ActivityTaskScheduled."""
    words = EventType.Name(event_type).removeprefix("EVENT_TYPE_").split("_")
    return "".join(w.capitalize() for w in words)


def _decode_payload(payload: dict[str, Any]) -> dict[str, Any]:
    meta = {k: base64.b64decode(v).decode(errors="replace") for k, v in payload.get("metadata", {}).items()}
    out: dict[str, Any] = {**meta, "data": base64.b64decode(payload.get("data", "")).decode(errors="replace")}
    if "externalPayloads" in payload:
        out["externalPayloads"] = payload["externalPayloads"]
    return out


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        meta = value.get("metadata")
        if isinstance(meta, dict) and "encoding" in meta:  # a Payload (its `data` is absent when empty)
            return _decode_payload(value)
        return {k: _clean(v) for k, v in value.items() if k not in IGNORED_FIELDS}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def normalize(events: Iterable[HistoryEvent]) -> list[dict[str, Any]]:
    """One dict per event, in history order: {"id", "type", "attrs"[, "extra"]}, comparable fields only."""
    out = []
    for event in events:
        name = _type_name(event.event_type)
        field = event.WhichOneof("attributes")
        attrs = _clean(MessageToDict(getattr(event, field))) if field else {}
        for key in IGNORED_PER_TYPE.get(name, ()):
            attrs.pop(key, None)
        if name == "WorkflowExecutionStarted" and attrs.get("initiator") in _TIMED_INITIATORS:
            # A retry or continue-as-new waits until a second after the previous run started: whether it
            # waits, and how long, depends on how long that run took, so the wait is not compared.
            attrs.pop("firstWorkflowTaskBackoff", None)
        # Event-level fields besides id, type, time and task id (links, userMetadata, workerMayIgnore...).
        extra = {
            k: v
            for k, v in _clean(MessageToDict(event)).items()
            if k not in ("eventId", "eventType") and not k.endswith("EventAttributes")
        }
        out.append(
            {"id": event.event_id, "type": name, "attrs": attrs, **({"extra": extra} if extra else {})}
        )
    return out


def render(normalized: list[dict[str, Any]]) -> list[str]:
    """One line per event: `5 ActivityTaskScheduled {...sorted json...}` (plus ` extra={...}` if any)."""
    lines = []
    for e in normalized:
        line = f"{e['id']} {e['type']} {json.dumps(e['attrs'], sort_keys=True)}"
        if "extra" in e:
            line += f" extra={json.dumps(e['extra'], sort_keys=True)}"
        lines.append(line)
    return lines


def assert_same_history(reference: list[dict[str, Any]], perdura: list[dict[str, Any]]) -> None:
    """Fail with a line diff (reference first) unless the two normalised histories are equal."""
    if reference == perdura:
        return
    diff = difflib.unified_diff(render(reference), render(perdura), "temporal", "perdura", lineterm="", n=2)
    raise AssertionError("histories differ:\n" + "\n".join(diff))
