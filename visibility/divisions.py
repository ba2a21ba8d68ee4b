"""What keeps standalone activities apart from workflows in the runs table and its visibility records.

A standalone activity (StartActivityExecution) is hosted by a run whose workflow id is the activity id
behind `ACTIVITY_PREFIX`, so activity ids and workflow ids are separate namespaces, as in Temporal:
workflow filters leave those runs out, and activity filters take only them (visibility.selectors).
"""

from __future__ import annotations

ACTIVITY_PREFIX = "\x1fstandalone-activity\x1f"
"""Starts with a control character (US) no SDK puts in an id; workflow ids that begin so are refused."""


def activity_host_id(activity_id: str) -> str:
    """The workflow id of the run hosting the standalone activity `activity_id`."""
    return ACTIVITY_PREFIX + activity_id


def is_activity_host(workflow_id: str) -> bool:
    return workflow_id.startswith(ACTIVITY_PREFIX)


def activity_id_of(workflow_id: str) -> str:
    """The activity id a host run's workflow id carries."""
    return workflow_id.removeprefix(ACTIVITY_PREFIX)
