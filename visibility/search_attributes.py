"""Search attribute names and types: Temporal's system attributes, typed values, validation of payloads."""

from __future__ import annotations

import contextlib
import enum
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from temporalio.api.common.v1 import Payload, SearchAttributes


class SaType(enum.IntEnum):
    """temporal.api.enums.v1.IndexedValueType, by the names Temporal prints."""

    Text = 1
    Keyword = 2
    Int = 3
    Double = 4
    Bool = 5
    Datetime = 6
    KeywordList = 7


class SearchAttributeError(ValueError):
    """A search attribute name, type or value the namespace does not accept (InvalidArgument)."""


@dataclass(frozen=True, slots=True)
class Column:
    """A system attribute backed by a typed column of the visibility record."""

    name: str
    type: SaType
    column: str
    nullable: bool = False


# System attributes stored in columns: never settable through the search attribute map.
COLUMNS: dict[str, Column] = {
    c.name: c
    for c in (
        Column("WorkflowId", SaType.Keyword, "workflow_id"),
        Column("RunId", SaType.Keyword, "run_id"),
        Column("WorkflowType", SaType.Keyword, "workflow_type"),
        Column("TaskQueue", SaType.Keyword, "task_queue"),
        Column("ExecutionStatus", SaType.Keyword, "status"),
        Column("StartTime", SaType.Datetime, "start_time"),
        Column("ExecutionTime", SaType.Datetime, "execution_time"),
        Column("CloseTime", SaType.Datetime, "close_time", nullable=True),
        Column("ExecutionDuration", SaType.Int, "execution_duration", nullable=True),
        Column("HistoryLength", SaType.Int, "history_length"),
        Column("HistorySizeBytes", SaType.Int, "history_size_bytes"),
        Column("StateTransitionCount", SaType.Int, "state_transition_count"),
        Column("ParentWorkflowId", SaType.Keyword, "parent_workflow_id", nullable=True),
        Column("ParentRunId", SaType.Keyword, "parent_run_id", nullable=True),
        Column("RootWorkflowId", SaType.Keyword, "root_workflow_id"),
        Column("RootRunId", SaType.Keyword, "root_run_id"),
    )
}

# System attributes that travel in a run's search attribute map (the SDK, the scheduler and the server
# set them); stored beside the custom ones.
PREDEFINED: dict[str, SaType] = {
    "BatcherNamespace": SaType.Keyword,
    "BatcherUser": SaType.Keyword,
    "BinaryChecksums": SaType.KeywordList,
    "BuildIds": SaType.KeywordList,
    "PerduraDataSubject": SaType.Keyword,  # a run's data subject: erasure by key destruction (README)
    "PerduraParked": SaType.KeywordList,  # the types of a run's parked activities (engine/history/parking.py)
    "TemporalChangeVersion": SaType.KeywordList,
    "TemporalExternalPayloadCount": SaType.Int,
    "TemporalExternalPayloadSizeBytes": SaType.Int,
    "TemporalNamespaceDivision": SaType.Keyword,
    "TemporalPauseInfo": SaType.KeywordList,
    "TemporalReportedProblems": SaType.KeywordList,
    "TemporalSchedulePaused": SaType.Bool,
    "TemporalScheduledById": SaType.Keyword,
    "TemporalScheduledStartTime": SaType.Datetime,
    "TemporalUsedWorkerDeploymentVersions": SaType.KeywordList,
    "TemporalWorkerDeployment": SaType.Keyword,
    "TemporalWorkerDeploymentVersion": SaType.Keyword,
    "TemporalWorkflowVersioningBehavior": SaType.Keyword,
}

SERVER_SET = frozenset({"PerduraParked"})
"""Predefined attributes only the server sets: a start, an upsert or a schedule may not set them (a run
that claimed to be parked would be listed for a redrive with nothing to redrive)."""

SYSTEM: dict[str, SaType] = {**{name: c.type for name, c in COLUMNS.items()}, **PREDEFINED}

# Per-namespace limits on custom attributes, by type: the SQL visibility store's (Temporal's dev server).
LIMITS: dict[SaType, int] = {
    SaType.Keyword: 10,
    SaType.KeywordList: 3,
    SaType.Text: 3,
    SaType.Int: 3,
    SaType.Double: 3,
    SaType.Bool: 3,
    SaType.Datetime: 3,
}
MAX_NAME_LENGTH = 64
MAX_VALUE_BYTES = 2048
"""Largest encoded value of one attribute (Temporal's `limit.searchAttributesSizeOfValue`, 2 KiB)."""
MAX_TOTAL_BYTES = 40 * 1024
"""Largest total of a run's attributes (Temporal's `limit.searchAttributesTotalSize`, 40 KiB)."""

STATUS_NAMES: dict[str, int] = {
    "Running": 1,
    "Completed": 2,
    "Failed": 3,
    "Canceled": 4,
    "Terminated": 5,
    "ContinuedAsNew": 6,
    "TimedOut": 7,
    "Paused": 8,
}
STATUS_BY_VALUE: dict[int, str] = {v: k for k, v in STATUS_NAMES.items()}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$"
)


def parse_datetime(text: str) -> datetime:
    """An RFC 3339 timestamp (what Temporal accepts for Datetime attributes), as an aware UTC datetime.

    Raises:
        ValueError: not RFC 3339 with a zone.
    """
    match = _RFC3339.match(text)
    if match is None:
        raise ValueError(text)
    year, month, day, hour, minute, second, fraction, zulu, sign, oh, om = match.groups()
    micros = int((fraction or "0").ljust(9, "0")[:6])
    value = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micros, tzinfo=UTC)
    if not zulu:
        offset = timedelta(hours=int(oh), minutes=int(om))
        value = value - offset if sign == "+" else value + offset
    return value


def to_micros(value: datetime) -> int:
    """Microseconds since the epoch: how the visibility record stores every time (exact on every database)."""
    delta = value - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def format_datetime(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def type_name(t: int) -> str:
    try:
        return SaType(t).name
    except ValueError:
        return "Unspecified"


def _type_of(payload: Payload) -> str:
    return payload.metadata.get("type", b"").decode(errors="replace")


def _invalid(name: str, t: SaType, shown: object) -> SearchAttributeError:
    return SearchAttributeError(f"invalid value for search attribute {name} of type {t.name}: {shown}")


def _shown(decoded: object) -> str:
    if isinstance(decoded, list):
        return "[" + " ".join(_shown(v) for v in decoded) + "]"
    if isinstance(decoded, bool):
        return "true" if decoded else "false"
    return str(decoded)


def decode_value(name: str, t: SaType, payload: Payload) -> object:
    """The typed value of one attribute, in its stored form (None removes the attribute).

    Stored forms: str for Keyword and Text, list[str] for KeywordList, int for Int, float for Double,
    bool for Bool, and microseconds since the epoch (int) for Datetime.

    Raises:
        SearchAttributeError: the value does not fit the type (worded as Temporal words it).
    """
    if payload.data in (b"", b"null"):
        return None
    try:
        decoded = json.loads(payload.data)
    except ValueError:
        raise _invalid(name, t, payload.data.decode(errors="replace")) from None
    if decoded is None:
        return None
    if t != SaType.KeywordList and isinstance(decoded, list):
        # Untyped (legacy) attributes come as lists: Temporal's SQL store takes one value, or none.
        if not decoded:
            return None
        if len(decoded) == 1 and not isinstance(decoded[0], list):
            decoded = decoded[0]
    if t in (SaType.Keyword, SaType.Text):
        if isinstance(decoded, str):
            return decoded
    elif t == SaType.KeywordList:
        if isinstance(decoded, list) and all(isinstance(v, str) for v in decoded):
            return decoded or None
    elif t == SaType.Int:
        # An int64, as Temporal decodes it (and as the Int slot columns hold it).
        if isinstance(decoded, int) and not isinstance(decoded, bool) and -(2**63) <= decoded < 2**63:
            return decoded
    elif t == SaType.Double:
        if isinstance(decoded, int | float) and not isinstance(decoded, bool):
            with contextlib.suppress(OverflowError):  # an integer past the largest double
                if math.isfinite(float(decoded)):
                    return float(decoded)
    elif t == SaType.Bool:
        if isinstance(decoded, bool):
            return decoded
    elif t == SaType.Datetime and isinstance(decoded, str):
        try:
            return to_micros(parse_datetime(decoded))
        except ValueError:
            pass
    raise _invalid(name, t, _shown(decoded))


def validate(
    search_attributes: SearchAttributes, custom: Mapping[str, SaType], *, namespace: str
) -> dict[str, object]:
    """Check a run's search attribute map against the namespace's registry; the typed values by name.

    Raises:
        SearchAttributeError: an unknown or column-backed attribute, a value of the wrong type, or a
            value or total over the size limits.
    """
    values: dict[str, object] = {}
    total = 0
    for name, payload in search_attributes.indexed_fields.items():
        if name in COLUMNS:
            raise SearchAttributeError(f"{name} attribute can't be set in SearchAttributes")
        if name in SERVER_SET:
            raise SearchAttributeError(
                f"{name} is set by Perdura when an activity is parked and can't be set"
            )
        t = PREDEFINED.get(name) or custom.get(name)
        if t is None:
            raise SearchAttributeError(
                f"Namespace {namespace} has no mapping defined for search attribute {name}"
            )
        size = len(payload.data) + sum(len(k) + len(v) for k, v in payload.metadata.items())
        if size > MAX_VALUE_BYTES:
            raise SearchAttributeError(
                f"search attribute {name} value size {size} exceeds size limit {MAX_VALUE_BYTES}"
            )
        total += size + len(name)
        values[name] = decode_value(name, t, payload)
    if total > MAX_TOTAL_BYTES:
        raise SearchAttributeError(
            f"total size of search attributes {total} exceeds size limit {MAX_TOTAL_BYTES}"
        )
    return values


def stored_values(search_attributes: SearchAttributes, custom: Mapping[str, SaType]) -> dict[str, object]:
    """The typed values to index: like `validate`, but skipping (never failing on) what no longer fits.

    A run keeps the attributes it was given; one removed from the registry since, or of a changed type,
    is simply not indexed.
    """
    values: dict[str, object] = {}
    for name, payload in search_attributes.indexed_fields.items():
        t = PREDEFINED.get(name) or custom.get(name)
        if t is None or name in COLUMNS:
            continue
        try:
            value = decode_value(name, t, payload)
        except SearchAttributeError:
            continue
        if value is not None:
            values[name] = value
    return values


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-. ]*$")


def check_new_name(name: str) -> None:
    """Raises SearchAttributeError for a name a custom attribute cannot have."""
    if name in SYSTEM:
        raise SearchAttributeError(f"Search attribute {name} is reserved by system.")
    if not name or len(name) > MAX_NAME_LENGTH or not _NAME.match(name):
        raise SearchAttributeError(f"Search attribute name {name!r} is not valid.")
