"""Workflows for the worker deployment tests: a pinned one and one without a declared behaviour."""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ApplicationError


@workflow.defn(name="DeploymentPinned", versioning_behavior=VersioningBehavior.PINNED)
class PinnedWorkflow:
    @workflow.run
    async def run(self) -> str:
        return "pinned"


@workflow.defn(name="DeploymentAutoUpgrade", versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class AutoUpgradeWorkflow:
    @workflow.run
    async def run(self) -> str:
        return "auto-upgrade"


@workflow.defn(name="DeploymentPlain")
class PlainWorkflow:
    @workflow.run
    async def run(self) -> str:
        return "plain"


@workflow.defn(name="RoutedPinned", versioning_behavior=VersioningBehavior.PINNED)
class PinnedV1:
    """Waits for `finish`; returns (and answers `build` with) the build it runs on."""

    def __init__(self) -> None:
        self.done = False

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.done)
        return "v1"

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.query
    def build(self) -> str:
        return "v1"


@workflow.defn(name="RoutedPinned", versioning_behavior=VersioningBehavior.PINNED)
class PinnedV2:
    """Waits for `finish`; returns (and answers `build` with) the build it runs on."""

    def __init__(self) -> None:
        self.done = False

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.done)
        return "v2"

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.query
    def build(self) -> str:
        return "v2"


@workflow.defn(name="RoutedAuto", versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class AutoV1:
    """Waits for `finish`; returns (and answers `build` with) the build it runs on."""

    def __init__(self) -> None:
        self.done = False

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.done)
        return "v1"

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.query
    def build(self) -> str:
        return "v1"


@workflow.defn(name="RoutedAuto", versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class AutoV2:
    """Waits for `finish`; returns (and answers `build` with) the build it runs on."""

    def __init__(self) -> None:
        self.done = False

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.done)
        return "v2"

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.query
    def build(self) -> str:
        return "v2"


@workflow.defn(name="RoutedContinuing", versioning_behavior=VersioningBehavior.PINNED)
class ContinuingV1:
    """Pinned on 1.0: continues as new (as `how` says) when told its deployment routes elsewhere."""

    @workflow.run
    async def run(self, how: str) -> str:
        if how == "done":
            return "v1"
        # A timer refreshes the task's target-changed flag (as the SDK's own test does).
        while not workflow.info().is_target_worker_deployment_version_changed():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        if how == "auto":
            workflow.continue_as_new(
                "done", initial_versioning_behavior=workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE
            )
        workflow.continue_as_new("done")
        raise AssertionError("continue_as_new returned")  # it raises, to end the run


@workflow.defn(name="RoutedContinuing", versioning_behavior=VersioningBehavior.PINNED)
class ContinuingV2:
    @workflow.run
    async def run(self, how: str) -> str:
        return "v2"


@workflow.defn(name="InheritParent", versioning_behavior=VersioningBehavior.PINNED)
class InheritParentV1:
    """Pinned: on `spawn`, runs an InheritChild on its own task queue and returns both builds."""

    def __init__(self) -> None:
        self.go = False

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: self.go)
        child = await workflow.execute_child_workflow(
            "InheritChild", id=f"{workflow.info().workflow_id}-child"
        )
        return ["v1", child]

    @workflow.signal
    def spawn(self) -> None:
        self.go = True

    @workflow.query
    def build(self) -> str:
        return "v1"


@workflow.defn(name="InheritParent", versioning_behavior=VersioningBehavior.PINNED)
class InheritParentV2:
    def __init__(self) -> None:
        self.go = False

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: self.go)
        child = await workflow.execute_child_workflow(
            "InheritChild", id=f"{workflow.info().workflow_id}-child"
        )
        return ["v2", child]

    @workflow.signal
    def spawn(self) -> None:
        self.go = True

    @workflow.query
    def build(self) -> str:
        return "v2"


@workflow.defn(name="InheritChild", versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class InheritChildV1:
    @workflow.run
    async def run(self) -> str:
        return "v1"


@workflow.defn(name="InheritChild", versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class InheritChildV2:
    @workflow.run
    async def run(self) -> str:
        return "v2"


@workflow.defn(name="RetriedAuto", versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class RetriedV1:
    """Fails its first attempt; returns the build its later attempt ran on."""

    @workflow.run
    async def run(self) -> str:
        if workflow.info().attempt == 1:
            raise ApplicationError("first attempt fails")
        return "v1"


@workflow.defn(name="RetriedAuto", versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class RetriedV2:
    @workflow.run
    async def run(self) -> str:
        if workflow.info().attempt == 1:
            raise ApplicationError("first attempt fails")
        return "v2"
