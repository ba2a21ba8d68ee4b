"""The rules of worker deployment versions that need no database: version strings and completions."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from temporalio.api.common.v1 import WorkerVersionStamp
from temporalio.api.deployment.v1 import WorkerDeploymentOptions, WorkerDeploymentVersion
from temporalio.api.enums.v1 import ContinueAsNewVersioningBehavior as CAN
from temporalio.api.enums.v1 import VersioningBehavior, WorkerVersioningMode
from temporalio.api.history.v1 import WorkflowExecutionStartedEventAttributes
from temporalio.api.workflow.v1 import VersioningOverride
from temporalio.api.workflowservice.v1 import RespondWorkflowTaskCompletedRequest

from engine.errors import InvalidArgument
from engine.history import versioning
from engine.history.state import MutableState
from engine.models import WorkerDeployment
from engine.services import task_routing
from engine.services.deployments import Ref, parse_version, version_string

PINNED = VersioningBehavior.VERSIONING_BEHAVIOR_PINNED
AUTO_UPGRADE = VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE
VERSIONED = WorkerVersioningMode.WORKER_VERSIONING_MODE_VERSIONED
UNVERSIONED = WorkerVersioningMode.WORKER_VERSIONING_MODE_UNVERSIONED


@pytest.mark.parametrize(
    ("text", "deployment", "expected"),
    [
        ("orders.1.0", "", Ref("orders", "1.0")),
        ("orders:1.0", "", Ref("orders", "1.0")),
        ("my.app.2.0", "my.app", Ref("my.app", "2.0")),
        ("__unversioned__", "orders", Ref("orders", "")),
    ],
)
def test_version_strings_of_both_server_ages_parse(text: str, deployment: str, expected: Ref) -> None:
    assert parse_version(text, deployment_name=deployment) == expected


@pytest.mark.parametrize("text", ["orders", ".1.0", "orders."])
def test_a_version_string_without_both_parts_is_invalid(text: str) -> None:
    with pytest.raises(InvalidArgument, match="expected format"):
        parse_version(text)


def test_a_version_of_another_deployment_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="does not match deployment name 'orders'"):
        parse_version("billing.1.0", deployment_name="orders")


def test_version_strings_are_what_the_sdk_builds() -> None:
    assert version_string("orders", "1.0") == "orders.1.0"
    assert version_string("orders", "") == "__unversioned__"


def _completion(mode: int, **kwargs: object) -> RespondWorkflowTaskCompletedRequest:
    options = WorkerDeploymentOptions(deployment_name="orders", build_id="1.0", worker_versioning_mode=mode)  # type: ignore[arg-type]
    return RespondWorkflowTaskCompletedRequest(deployment_options=options, **kwargs)  # type: ignore[arg-type]


def test_a_versioned_completion_declares_its_version_and_behaviour() -> None:
    fields = versioning.declared(_completion(VERSIONED, versioning_behavior=PINNED))
    assert fields.version == WorkerDeploymentVersion(deployment_name="orders", build_id="1.0")
    assert fields.behavior == PINNED
    assert fields.stamp == WorkerVersionStamp(build_id="1.0", use_versioning=True)


def test_an_unversioned_completion_drops_the_behaviour_its_sdk_reports() -> None:
    fields = versioning.declared(_completion(UNVERSIONED, versioning_behavior=PINNED))
    assert fields.version is None
    assert fields.behavior == VersioningBehavior.VERSIONING_BEHAVIOR_UNSPECIFIED
    assert fields.deployment_name == "orders"
    assert fields.stamp == WorkerVersionStamp(build_id="1.0")


def test_a_stamp_the_sdk_sent_is_kept_as_sent() -> None:
    stamp = WorkerVersionStamp(build_id="sent", use_versioning=False)
    assert versioning.declared(_completion(UNVERSIONED, worker_version_stamp=stamp)).stamp == stamp
    assert versioning.declared(RespondWorkflowTaskCompletedRequest()).stamp is None


def _state(**kwargs: object) -> MutableState:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    base: dict[str, object] = {
        "namespace_id": "n",
        "namespace": "default",
        "workflow_id": "wf",
        "run_id": "r",
        "first_run_id": "r",
        "workflow_type": "T",
        "task_queue": "tq",
        "start_time": now,
        "execution_time": now,
        "workflow_task_timeout": 10.0,
    }
    base.update(kwargs)
    return MutableState(**base)  # type: ignore[arg-type]


def _pinned_v1() -> MutableState:
    return _state(versioning_behavior=PINNED, deployment_name="orders", deployment_build_id="1.0")


def test_a_pinned_run_continued_as_new_keeps_its_version_unless_told_otherwise() -> None:
    kept = _state()
    versioning.continue_as_new(_pinned_v1(), kept, 0)
    assert task_routing.pinned_to(kept) == task_routing.PollerVersion("orders", "1.0")
    upgraded = _state()
    versioning.continue_as_new(_pinned_v1(), upgraded, CAN.CONTINUE_AS_NEW_VERSIONING_BEHAVIOR_AUTO_UPGRADE)
    assert task_routing.pinned_to(upgraded) is None
    assert upgraded.deployment_name == "orders"
    ramping = _state()
    versioning.continue_as_new(
        _pinned_v1(), ramping, CAN.CONTINUE_AS_NEW_VERSIONING_BEHAVIOR_USE_RAMPING_VERSION
    )
    assert ramping.use_ramping
    assert task_routing.pinned_to(ramping) is None
    elsewhere = _state(task_queue="other")
    versioning.continue_as_new(_pinned_v1(), elsewhere, 0)
    assert task_routing.pinned_to(elsewhere) is None


def test_an_override_wins_over_the_behaviour_workers_declare() -> None:
    state = _pinned_v1()
    override = VersioningOverride(
        pinned=VersioningOverride.PinnedOverride(
            behavior=VersioningOverride.PINNED_OVERRIDE_BEHAVIOR_PINNED,
            version=WorkerDeploymentVersion(deployment_name="orders", build_id="0.9"),
        )
    )
    versioning.validate_override(override)
    versioning.apply_override(state, override)
    assert task_routing.pinned_to(state) == task_routing.PollerVersion("orders", "0.9")
    versioning.apply_override(state, VersioningOverride(auto_upgrade=True))
    assert task_routing.pinned_to(state) is None


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (VersioningOverride(pinned=VersioningOverride.PinnedOverride(behavior=1)), "must provide version"),
        (VersioningOverride(behavior=PINNED), "must provide deployment (deprecated) or pinned version"),
    ],
)
def test_incomplete_overrides_are_refused(override: VersioningOverride, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        versioning.validate_override(override)


def test_ramp_points_spread_workflow_ids_and_stay_put() -> None:
    points = [task_routing.ramp_point(f"wf-{i}") for i in range(2000)]
    assert all(0 <= p < 100 for p in points)
    assert 40 < sum(p < 50 for p in points) / 20 < 60
    assert task_routing.ramp_point("wf-1") == points[1]


def test_routing_sends_a_ramp_share_to_the_ramping_version() -> None:
    deployment = WorkerDeployment(
        name="orders", current_build_id="1.0", ramping_build_id="2.0", ramping_percentage=0
    )
    assert task_routing.routed_build_id(deployment, "wf") == "1.0"
    assert task_routing.routed_build_id(deployment, "wf", use_ramping=True) == "2.0"
    deployment.ramping_percentage = 100
    assert task_routing.routed_build_id(deployment, "wf") == "2.0"


def test_a_child_inherits_its_pinned_parents_version_where_that_version_polls_its_queue() -> None:
    def nowhere(queue: str, name: str, build_id: str) -> bool:
        return False

    def other_queue_in_v1(queue: str, name: str, build_id: str) -> bool:
        return (queue, name, build_id) == ("other", "orders", "1.0")

    parent = _pinned_v1()
    same = versioning.inherited_by_child(parent, parent.task_queue, nowhere)
    assert same == versioning.Inherited(
        WorkerDeploymentVersion(deployment_name="orders", build_id="1.0"), None
    )
    assert versioning.inherited_by_child(parent, "other", nowhere) is None
    assert versioning.inherited_by_child(parent, "other", other_queue_in_v1) == same
    assert (
        versioning.inherited_by_child(_state(versioning_behavior=AUTO_UPGRADE), parent.task_queue, nowhere)
        is None
    )

    # A pinning override is the parent's version, and it is passed on with it.
    overridden = _state()
    versioning.apply_override(
        overridden,
        VersioningOverride(
            pinned=VersioningOverride.PinnedOverride(
                behavior=VersioningOverride.PINNED_OVERRIDE_BEHAVIOR_PINNED,
                version=WorkerDeploymentVersion(deployment_name="orders", build_id="2.0"),
            )
        ),
    )
    passed_on = versioning.inherited_by_child(overridden, overridden.task_queue, nowhere)
    assert passed_on is not None
    assert passed_on.pinned is not None
    assert passed_on.pinned.build_id == "2.0"
    child = _state()
    attrs = WorkflowExecutionStartedEventAttributes()
    versioning.apply_inherited(child, attrs, passed_on)
    assert attrs.inherited_pinned_version.build_id == "2.0"
    assert attrs.versioning_override == passed_on.override
    assert task_routing.pinned_to(child) == task_routing.PollerVersion("orders", "2.0")


def _one_time(build_id: str) -> VersioningOverride:
    target = WorkerDeploymentVersion(deployment_name="orders", build_id=build_id)
    return VersioningOverride(one_time=VersioningOverride.OneTimeOverride(target_deployment_version=target))


def test_a_one_time_override_routes_like_a_pin_until_a_task_completes_on_its_version() -> None:
    state = _state(versioning_behavior=AUTO_UPGRADE, deployment_name="orders", deployment_build_id="1.0")
    versioning.validate_override(_one_time("2.0"))
    versioning.apply_override(state, _one_time("2.0"))
    assert task_routing.pinned_to(state) == task_routing.PollerVersion("orders", "2.0")
    assert versioning.override_of(state) == _one_time("2.0")

    # A completion on another version leaves it pending; one on its version fulfils and clears it.
    other = versioning.Declared("orders", WorkerDeploymentVersion(deployment_name="orders", build_id="1.0"))
    versioning.record(state, other)
    assert versioning.override_of(state) == _one_time("2.0")
    target = WorkerDeploymentVersion(deployment_name="orders", build_id="2.0")
    versioning.record(state, versioning.Declared("orders", target, AUTO_UPGRADE))
    assert versioning.override_of(state) is None
    assert task_routing.pinned_to(state) is None  # auto-upgrade again, as the worker declared


def test_a_one_time_override_is_the_runs_own_not_its_next_runs_nor_its_childrens() -> None:
    state = _state(versioning_behavior=AUTO_UPGRADE, deployment_name="orders", deployment_build_id="1.0")
    versioning.apply_override(state, _one_time("2.0"))
    continued = _state()
    versioning.continue_as_new(state, continued, 0)
    assert versioning.override_of(continued) is None
    inherited = versioning.inherited_by_child(state, state.task_queue, lambda *_: True)
    assert inherited is not None
    assert inherited.override is None


def test_a_one_time_override_without_its_version_is_invalid() -> None:
    with pytest.raises(
        InvalidArgument, match="must provide target deployment version if override is one-time"
    ):
        versioning.validate_override(VersioningOverride(one_time=VersioningOverride.OneTimeOverride()))


def test_a_retry_keeps_a_pinned_version_the_run_inherited_and_a_cron_run_does_not() -> None:
    child = _state()
    parent_version = WorkerDeploymentVersion(deployment_name="orders", build_id="1.0")
    versioning.apply_inherited(
        child, WorkflowExecutionStartedEventAttributes(), versioning.Inherited(parent_version, None)
    )
    kept = versioning.carried_to_retry_or_cron(child, retry=True)
    assert kept is not None
    assert kept.pinned == parent_version
    assert versioning.carried_to_retry_or_cron(child, retry=False) is None  # cron runs never inherit

    # Pinned by its own worker, not inherited: a retry starts where routing sends it.
    assert versioning.carried_to_retry_or_cron(_pinned_v1(), retry=True) is None


def test_a_pinning_override_is_carried_to_retries_and_cron_runs_a_one_time_one_is_not() -> None:
    state = _state()
    pin = VersioningOverride(
        pinned=VersioningOverride.PinnedOverride(
            behavior=VersioningOverride.PINNED_OVERRIDE_BEHAVIOR_PINNED,
            version=WorkerDeploymentVersion(deployment_name="orders", build_id="0.9"),
        )
    )
    versioning.apply_override(state, pin)
    for retry in (True, False):
        kept = versioning.carried_to_retry_or_cron(state, retry=retry)
        assert kept is not None
        assert kept.override == pin
    versioning.apply_override(state, _one_time("2.0"))
    assert versioning.carried_to_retry_or_cron(state, retry=True) is None
