"""GetSystemInfo: the server version and the capabilities the SDKs check before using a feature."""

from __future__ import annotations

import grpc
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

SERVER_VERSION = "1.32.0"


async def get_system_info(
    request: rr.GetSystemInfoRequest, context: grpc.aio.ServicerContext
) -> rr.GetSystemInfoResponse:
    return rr.GetSystemInfoResponse(
        server_version=SERVER_VERSION,
        capabilities=rr.GetSystemInfoResponse.Capabilities(
            signal_and_query_header=True,
            internal_error_differentiation=True,
            activity_failure_include_heartbeat=True,
            encoded_failure_attributes=True,
            supports_schedules=True,
            build_id_based_versioning=True,
            upsert_memo=True,
            sdk_metadata=True,
            eager_workflow_start=True,
        ),
    )
