"""GetSystemInfo: the server version and the capabilities the SDKs check before using a feature.

Only what Perdura serves is advertised (issue 16): not Nexus, not server-scaled deployments, which
Server 1.32 claims too. Build-id based versioning is claimed as the real dev server claims it: the SDKs
then stamp their polls and completions with their build id, which the workflow task events record; the
deprecated version-set and rules APIs are refused as that server refuses them by default
(engine/api/rpc/legacy_versioning.py).
tests/reference/test_system_info_differential.py compares the answer with the real server's.
"""

from __future__ import annotations

import grpc
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

SERVER_VERSION = "1.32.0"

CAPABILITIES = rr.GetSystemInfoResponse.Capabilities(
    signal_and_query_header=True,
    internal_error_differentiation=True,
    activity_failure_include_heartbeat=True,
    encoded_failure_attributes=True,
    build_id_based_versioning=True,
    supports_schedules=True,
    upsert_memo=True,
    sdk_metadata=True,
    eager_workflow_start=True,
    count_group_by_execution_status=True,  # CountWorkflowExecutions takes GROUP BY ExecutionStatus
)


async def get_system_info(
    request: rr.GetSystemInfoRequest, context: grpc.aio.ServicerContext
) -> rr.GetSystemInfoResponse:
    return rr.GetSystemInfoResponse(server_version=SERVER_VERSION, capabilities=CAPABILITIES)
