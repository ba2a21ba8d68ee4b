"""Differential GetSystemInfo test: Perdura advertises the real server's capabilities minus what it does not serve.

Server 1.32.0 (the dev server) also claims Nexus and server-scaled deployments; Perdura serves neither
(README, Known limits), so it must not claim them (issue 16). Both claim build-id based versioning, which
makes the SDKs stamp their build id on polls and completions (tests/reference/test_build_id_differential.py).
"""

from __future__ import annotations

import pytest
from google.protobuf.json_format import MessageToDict
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest

pytestmark = pytest.mark.reference

NOT_SERVED = {"nexus", "serverScaledDeployments"}


async def test_capabilities_are_the_real_servers_minus_what_perdura_does_not_serve(both_clients):
    answers = {
        name: await client.workflow_service.get_system_info(GetSystemInfoRequest())
        for name, client in both_clients.items()
    }
    temporal = MessageToDict(answers["temporal"].capabilities)
    perdura = MessageToDict(answers["perdura"].capabilities)
    assert set(temporal) >= NOT_SERVED  # what the real server claims, stated
    assert perdura == {k: v for k, v in temporal.items() if k not in NOT_SERVED}
    assert answers["perdura"].server_version == answers["temporal"].server_version
