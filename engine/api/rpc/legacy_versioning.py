"""The deprecated versioning APIs: version sets (v0.1), versioning rules (v0.2), and Deployments (v0.30).

`temporal server start-dev` (Server 1.32) leaves version sets and rules off unless dynamic config turns
them on, and answers each call with PermissionDenied and these messages; Perdura answers the same way. Worker
deployments (engine/api/rpc/deployments.py) are what replaced them; Server 1.32 no longer serves the
Deployments of v0.30 at all (UNIMPLEMENTED, saying what to use instead), nor does Perdura. The capability
`build_id_based_versioning` is still advertised, as the real server advertises it: it tells the SDKs to
stamp polls and completions with their build id, which Perdura records on the workflow task events (so
`workflow.info().get_current_build_id()` answers as on Temporal).
tests/reference/test_build_id_differential.py compares the answers with the real server's.
"""

from __future__ import annotations

from typing import NoReturn, Protocol

import grpc
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine.api.rpc import resolve
from engine.errors import PermissionDenied, Unimplemented

VERSION_SETS_OFF = "Worker versioning v0.1 (Version Set-based, deprecated) is disabled on this namespace."
RULES_OFF = "Worker versioning v0.2 (Rules-based, deprecated) is disabled on this namespace."
DEPLOYMENTS_GONE = "Deployments are deprecated and no longer supported, use Worker Deployments instead"


class _NamespaceRequest(Protocol):
    namespace: str


async def _refuse(request: _NamespaceRequest, message: str) -> NoReturn:
    await resolve.namespace(request.namespace)  # an unknown namespace is NotFound first, as on Temporal
    raise PermissionDenied(message)


async def update_worker_build_id_compatibility(
    request: rr.UpdateWorkerBuildIdCompatibilityRequest, context: grpc.aio.ServicerContext
) -> rr.UpdateWorkerBuildIdCompatibilityResponse:
    return await _refuse(request, VERSION_SETS_OFF)


async def get_worker_build_id_compatibility(
    request: rr.GetWorkerBuildIdCompatibilityRequest, context: grpc.aio.ServicerContext
) -> rr.GetWorkerBuildIdCompatibilityResponse:
    return await _refuse(request, VERSION_SETS_OFF)


async def get_worker_task_reachability(
    request: rr.GetWorkerTaskReachabilityRequest, context: grpc.aio.ServicerContext
) -> rr.GetWorkerTaskReachabilityResponse:
    return await _refuse(request, RULES_OFF)


async def update_worker_versioning_rules(
    request: rr.UpdateWorkerVersioningRulesRequest, context: grpc.aio.ServicerContext
) -> rr.UpdateWorkerVersioningRulesResponse:
    return await _refuse(request, RULES_OFF)


async def get_worker_versioning_rules(
    request: rr.GetWorkerVersioningRulesRequest, context: grpc.aio.ServicerContext
) -> rr.GetWorkerVersioningRulesResponse:
    return await _refuse(request, RULES_OFF)


async def _gone(request: object, context: grpc.aio.ServicerContext) -> NoReturn:
    raise Unimplemented(DEPLOYMENTS_GONE)


describe_deployment = _gone
list_deployments = _gone
get_current_deployment = _gone
set_current_deployment = _gone
get_deployment_reachability = _gone
