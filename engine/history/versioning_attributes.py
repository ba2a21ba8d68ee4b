"""The search attributes Temporal keeps of a run's worker versions, set without an event as it sets them.

- `BuildIds`: the build ids whose workers completed the run's workflow tasks (`unversioned:<id>`, or
  `versioned:<id>` for the older build-id versioning), led by the sentinel `unversioned` while the run has
  no versioning behaviour, or by `pinned:<deployment>:<build id>` while it is pinned.
- `TemporalUsedWorkerDeploymentVersions`: every deployment version that completed one of its tasks.
- `TemporalWorkerDeployment`, `TemporalWorkerDeploymentVersion` (`<deployment>:<build id>`) and
  `TemporalWorkflowVersioningBehavior` (`Pinned`, `AutoUpgrade`): what is in force, an override first.

They are how runs are found by version (`TemporalWorkerDeploymentVersion = 'orders:2.0'`), and how a
version's drainage counts the pinned runs still open on it (engine/services/drainage.py).
"""

from __future__ import annotations

import json

from temporalio.api.common.v1 import Payload, SearchAttributes, WorkerVersionStamp
from temporalio.api.deployment.v1 import WorkerDeploymentVersion

from engine.history import versioning
from engine.history.state import MutableState

BUILD_IDS = "BuildIds"
USED_VERSIONS = "TemporalUsedWorkerDeploymentVersions"
DEPLOYMENT = "TemporalWorkerDeployment"
VERSION = "TemporalWorkerDeploymentVersion"
BEHAVIOR = "TemporalWorkflowVersioningBehavior"
NAMES = (BUILD_IDS, USED_VERSIONS, DEPLOYMENT, VERSION, BEHAVIOR)
UNVERSIONED = "unversioned"
BEHAVIOR_NAMES: dict[int, str] = {versioning.PINNED: "Pinned", versioning.AUTO_UPGRADE: "AutoUpgrade"}
MAX_VALUE_BYTES = 2048
"""Temporal's limit on one attribute's value: the oldest build ids go first (never the leading sentinel)."""


def version_string(deployment_name: str, build_id: str) -> str:
    return f"{deployment_name}:{build_id}" if deployment_name and build_id else ""


def _stamp_entry(stamp: WorkerVersionStamp | None) -> str:
    if stamp is None:
        return ""
    if not stamp.build_id:
        return UNVERSIONED
    return f"{'versioned' if stamp.use_versioning else 'unversioned'}:{stamp.build_id}"


def build_ids(
    existing: list[str], stamp: WorkerVersionStamp | None, behavior: int, version: str
) -> list[str]:
    """The BuildIds list after a task completed with `stamp` (None: no task, an override changed)."""
    leading = []
    if not (stamp is not None and stamp.use_versioning) and behavior == versioning.UNSPECIFIED:
        leading.append(UNVERSIONED)
    if behavior == versioning.PINNED:
        leading.append(f"pinned:{version}")
    entry = _stamp_entry(stamp)
    kept = [e for e in existing if e != UNVERSIONED and not e.startswith(("pinned", "assigned:"))]
    values = leading + kept + ([entry] if entry and entry not in existing else [])
    while len(_encoded(values)) > MAX_VALUE_BYTES and values:
        del values[1 if len(values) > 1 and values[0] == UNVERSIONED else 0]
    return values


def index(
    state: MutableState, stamp: WorkerVersionStamp | None = None, used: WorkerDeploymentVersion | None = None
) -> bool:
    """Bring the run's versioning attributes up to date (after a completion with `stamp` by version `used`,
    or an override's change); returns whether they changed, so that visibility is written again."""
    attributes = (
        SearchAttributes.FromString(state.search_attributes)
        if state.search_attributes
        else SearchAttributes()
    )
    before = _snapshot(attributes)
    behavior, name, build_id = versioning.effective_version(state)
    version = version_string(name, build_id)
    _set_list(attributes, BUILD_IDS, build_ids(_list(attributes, BUILD_IDS), stamp, behavior, version))
    used_versions = _list(attributes, USED_VERSIONS)
    used_text = version_string(used.deployment_name, used.build_id) if used is not None else ""
    if used_text and used_text not in used_versions:
        _set_list(attributes, USED_VERSIONS, [*used_versions, used_text])
    _set_keyword(attributes, DEPLOYMENT, name or state.worker_deployment_name)
    _set_keyword(attributes, VERSION, version)
    _set_keyword(attributes, BEHAVIOR, BEHAVIOR_NAMES.get(behavior, ""))
    if _snapshot(attributes) == before:
        return False
    state.search_attributes = attributes.SerializeToString() if attributes.indexed_fields else b""
    return True


def _snapshot(attributes: SearchAttributes) -> dict[str, bytes]:
    """Its own attributes as they stand (it runs at every completion: the run's others are left unread)."""
    fields = attributes.indexed_fields
    return {name: fields[name].SerializeToString(deterministic=True) for name in NAMES if name in fields}


def _encoded(values: list[str]) -> bytes:
    return json.dumps(values, separators=(",", ":"), ensure_ascii=False).encode()


def _list(attributes: SearchAttributes, name: str) -> list[str]:
    payload = attributes.indexed_fields.get(name)
    if payload is None or not payload.data:
        return []
    value = json.loads(payload.data)
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _set_list(attributes: SearchAttributes, name: str, values: list[str]) -> None:
    if not values:
        attributes.indexed_fields.pop(name, None)
        return
    attributes.indexed_fields[name].CopyFrom(
        Payload(metadata={"encoding": b"json/plain", "type": b"KeywordList"}, data=_encoded(values))
    )


def _set_keyword(attributes: SearchAttributes, name: str, value: str) -> None:
    if not value:
        attributes.indexed_fields.pop(name, None)
        return
    attributes.indexed_fields[name].CopyFrom(
        Payload(metadata={"encoding": b"json/plain", "type": b"Keyword"}, data=json.dumps(value).encode())
    )
