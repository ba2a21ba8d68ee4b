"""The TemporalPauseInfo search attribute: how paused runs are found (`TemporalPauseInfo = "Workflow:<id>"`)."""

from __future__ import annotations

import json

from temporalio.api.common.v1 import Payload, SearchAttributes

from engine.history import versioning_attributes
from engine.history.state import MutableState

ATTRIBUTE = "TemporalPauseInfo"
PARKED = "PerduraParked"
"""The types of the run's parked activities (parking.py, which builds it)."""


def index(state: MutableState) -> None:
    """Set the attribute as Temporal builds it: the run's entries while paused and one per paused activity
    type; no attribute when nothing is paused. It is set without an event, as Temporal sets it."""
    entries: list[str] = []
    if state.pause is not None:
        entries.append(f"Workflow:{state.workflow_id}")
        if state.pause.reason:
            entries.append(f"Reason:{state.pause.reason}")
    types = sorted({info.activity_type for info in state.activities.values() if info.paused})
    entries += [f"property:activityType={name}" for name in types]
    attributes = _parsed(state.search_attributes)
    if entries:
        attributes.indexed_fields[ATTRIBUTE].CopyFrom(
            Payload(
                metadata={"encoding": b"json/plain", "type": b"KeywordList"},
                data=json.dumps(entries, separators=(",", ":"), ensure_ascii=False).encode(),
            )
        )
    else:
        attributes.indexed_fields.pop(ATTRIBUTE, None)
    state.search_attributes = attributes.SerializeToString() if attributes.indexed_fields else b""


def inheritable(search_attributes: bytes) -> SearchAttributes | None:
    """A run's search attributes as the next run of its chain inherits them: without the pause info,
    which describes this run, not the next (it starts unpaused), nor its parked activities, nor what the
    server kept of its worker versions."""
    attributes = _parsed(search_attributes)
    attributes.indexed_fields.pop(ATTRIBUTE, None)
    attributes.indexed_fields.pop(PARKED, None)
    for name in versioning_attributes.NAMES:  # the next run gets its own from its own tasks, as on Temporal
        attributes.indexed_fields.pop(name, None)
    return attributes if attributes.indexed_fields else None


def _parsed(search_attributes: bytes) -> SearchAttributes:
    return SearchAttributes.FromString(search_attributes) if search_attributes else SearchAttributes()
