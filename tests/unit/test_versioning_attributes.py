"""The worker-version search attributes as Temporal keeps them (engine/history/versioning_attributes.py);
tests/reference/test_build_id_differential.py compares them with the real server's."""

from __future__ import annotations

import json

from temporalio.api.common.v1 import SearchAttributes, WorkerVersionStamp
from temporalio.api.deployment.v1 import WorkerDeploymentVersion
from temporalio.api.workflow.v1 import VersioningOverride

from engine.history import versioning, versioning_attributes
from tests.unit.history_harness import Run

PINNED, AUTO, NONE = versioning.PINNED, versioning.AUTO_UPGRADE, versioning.UNSPECIFIED


def _stamp(build_id: str, use_versioning: bool = False) -> WorkerVersionStamp:
    return WorkerVersionStamp(build_id=build_id, use_versioning=use_versioning)


def test_an_unversioned_run_lists_its_build_ids_behind_the_unversioned_sentinel():
    first = versioning_attributes.build_ids([], _stamp("1.0"), NONE, "")
    assert first == ["unversioned", "unversioned:1.0"]
    assert versioning_attributes.build_ids(first, _stamp("1.0"), NONE, "") == first
    assert versioning_attributes.build_ids(first, _stamp("1.1"), NONE, "") == [
        "unversioned",
        "unversioned:1.0",
        "unversioned:1.1",
    ]
    assert versioning_attributes.build_ids([], None, NONE, "") == ["unversioned"]  # a worker without a stamp


def test_a_pinned_run_leads_with_its_version_and_loses_it_when_it_moves():
    pinned = versioning_attributes.build_ids(
        ["unversioned", "unversioned:1.0"], _stamp("1.0"), PINNED, "d:1.0"
    )
    assert pinned == ["pinned:d:1.0", "unversioned:1.0"]
    moved = versioning_attributes.build_ids(pinned, _stamp("2.0"), AUTO, "d:2.0")
    assert moved == ["unversioned:1.0", "unversioned:2.0"]
    assert versioning_attributes.build_ids([], _stamp("b", use_versioning=True), NONE, "") == ["versioned:b"]


def test_the_oldest_build_ids_go_first_when_the_list_outgrows_its_limit_but_never_the_sentinel():
    many = ["unversioned"] + [f"unversioned:{i:04d}-{'x' * 60}" for i in range(40)]
    kept = versioning_attributes.build_ids(many, _stamp("new"), NONE, "")
    assert kept[0] == "unversioned"
    assert kept[-1] == "unversioned:new"
    assert "unversioned:0000-" + "x" * 60 not in kept
    assert len(json.dumps(kept, separators=(",", ":"))) <= versioning_attributes.MAX_VALUE_BYTES


def _attributes(run: Run) -> dict[str, object]:
    attributes = SearchAttributes.FromString(run.state.search_attributes)
    return {name: json.loads(p.data) for name, p in attributes.indexed_fields.items()}


def test_a_versioned_completion_sets_the_deployment_version_and_behaviour_and_an_override_wins():
    run = Run()
    run.state.deployment_name, run.state.deployment_build_id = "orders", "1.0"
    run.state.versioning_behavior = PINNED
    used = WorkerDeploymentVersion(deployment_name="orders", build_id="1.0")
    assert versioning_attributes.index(run.state, _stamp("1.0"), used)
    assert _attributes(run) == {
        "BuildIds": ["pinned:orders:1.0", "unversioned:1.0"],
        "TemporalUsedWorkerDeploymentVersions": ["orders:1.0"],
        "TemporalWorkerDeployment": "orders",
        "TemporalWorkerDeploymentVersion": "orders:1.0",
        "TemporalWorkflowVersioningBehavior": "Pinned",
    }
    assert not versioning_attributes.index(run.state, _stamp("1.0"), used)  # nothing changed

    versioning.apply_override(run.state, VersioningOverride(auto_upgrade=True))
    assert versioning_attributes.index(run.state)
    assert _attributes(run)["TemporalWorkflowVersioningBehavior"] == "AutoUpgrade"
    assert _attributes(run)["BuildIds"] == ["unversioned:1.0"]
    assert _attributes(run)["TemporalUsedWorkerDeploymentVersions"] == ["orders:1.0"]  # an override adds none
