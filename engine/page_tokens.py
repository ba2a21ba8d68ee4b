"""Page tokens the server hands out, read back strictly: a token it did not issue is refused, never used.

A token comes back from the client, so whatever is inside is untrusted: a history token's run id must be a
UUID and its next event id an integer a database column can hold, and a schedule list token must carry our
marker. Anything else answers INVALID_ARGUMENT "Invalid NextPageToken." (Temporal's words).
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid

from engine.errors import InvalidArgument

INVALID = "Invalid NextPageToken."
_MAX_EVENT_ID = 2**63 - 1
_SCHEDULES = b"sched:"


def history_encode(*, run_id: str, next_event_id: int) -> bytes:
    return base64.b64encode(json.dumps({"run": run_id, "next": next_event_id}).encode())


def history_decode(token: bytes) -> tuple[str, int]:
    """(run id, first event id) of a GetWorkflowExecutionHistory token."""
    try:
        cursor = json.loads(base64.b64decode(token, validate=True))
    except (ValueError, binascii.Error):
        raise InvalidArgument(INVALID) from None
    if not isinstance(cursor, dict):
        raise InvalidArgument(INVALID)
    run_id, next_event_id = cursor.get("run"), cursor.get("next")
    if not isinstance(run_id, str) or not _is_uuid(run_id):
        raise InvalidArgument(INVALID)
    return run_id, _event_id(next_event_id)


def reverse_decode(token: bytes) -> int:
    """The event id a GetWorkflowExecutionHistoryReverse page ends before."""
    try:
        text = token.decode("ascii")
    except UnicodeDecodeError:
        raise InvalidArgument(INVALID) from None
    if not text.isdigit():
        raise InvalidArgument(INVALID)
    return _event_id(int(text))


def schedules_encode(last_schedule_id: str) -> bytes:
    return base64.urlsafe_b64encode(_SCHEDULES + last_schedule_id.encode())


def schedules_decode(token: bytes) -> str:
    """The schedule id the previous ListSchedules page ended with."""
    try:
        raw = base64.b64decode(token, altchars=b"-_", validate=True)
        text = raw.removeprefix(_SCHEDULES).decode() if raw.startswith(_SCHEDULES) else None
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidArgument(INVALID) from None
    if text is None:
        raise InvalidArgument(INVALID)
    return text


def _event_id(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_EVENT_ID:
        raise InvalidArgument(INVALID)
    return value


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


_BATCHES = b"batch:"


def batches_encode(last_pk: int) -> bytes:
    return base64.urlsafe_b64encode(_BATCHES + str(last_pk).encode())


def batches_decode(token: bytes) -> int:
    """The row id the previous ListBatchOperations page ended with."""
    try:
        raw = base64.b64decode(token, altchars=b"-_", validate=True)
    except (ValueError, binascii.Error):
        raise InvalidArgument(INVALID) from None
    text = raw.removeprefix(_BATCHES) if raw.startswith(_BATCHES) else b""
    if not text.isdigit():
        raise InvalidArgument(INVALID)
    return _event_id(int(text))
