"""Namespace RPCs: register, describe, list, update, deprecate (WorkflowService) and delete (OperatorService).

The interceptor (engine/api/auth.py) has already checked the caller's access; what a caller may
*see* (ListNamespaces) and which organisation a new namespace joins depend on the caller too.
"""

from __future__ import annotations

from datetime import timedelta

import grpc
from temporalio.api.enums.v1 import NamespaceState
from temporalio.api.errordetails.v1 import NamespaceAlreadyExistsFailure
from temporalio.api.operatorservice.v1 import request_response_pb2 as orr
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads, validation
from engine.api import auth, convert
from engine.api.rpc import resolve
from engine.errors import AlreadyExists, FailedPrecondition, InvalidArgument
from tenants import errors, selectors
from tenants.auth import Principal
from tenants.models import ApiKey, Namespace, Organization
from tenants.services import namespaces as namespace_services


def _retention_days(duration: timedelta) -> int:
    days, rest = divmod(duration, timedelta(days=1))
    if rest or not 1 <= days <= 90:
        shown = f"{days}d" if not rest else f"{duration.total_seconds() / 3600:g}h"
        raise InvalidArgument(f"retention must be a whole number of days between 1 and 90, not {shown}")
    return days


def _register(
    request: rr.RegisterNamespaceRequest,
    principal: Principal,
    retention_days: int,
    archival: namespace_services.ArchivalRequest,
) -> None:
    if principal.anonymous:
        # The operator: a name with an organisation's suffix joins that organisation.
        base, dot, slug = request.namespace.rpartition(".")
        organization = Organization.objects.filter(slug=slug).first() if dot and base else None
    else:
        organization = Organization.objects.get(pk=principal.organization_id)
    try:
        namespace = namespace_services.namespace_register(
            name=request.namespace,
            organization=organization,
            description=request.description,
            owner_email=request.owner_email,
            retention_days=retention_days,
            archival_request=archival,
        )
    except errors.NamespaceAlreadyExists:
        raise AlreadyExists("Namespace already exists.", NamespaceAlreadyExistsFailure()) from None
    except errors.NamespaceError as e:
        raise InvalidArgument(str(e)) from None
    except errors.QuotaExceeded as e:
        # Not RESOURCE_EXHAUSTED: the SDKs would retry it, and waiting does not lift a cap.
        raise FailedPrecondition(str(e)) from None
    if not principal.anonymous:
        # The key that registered a namespace may use it: otherwise it could not even describe it.
        ApiKey.objects.get(pk=principal.key_id).namespaces.add(namespace)


async def register_namespace(
    request: rr.RegisterNamespaceRequest, context: grpc.aio.ServicerContext
) -> rr.RegisterNamespaceResponse:
    if not request.namespace:
        raise InvalidArgument("Namespace is not set on request.")
    if request.is_global_namespace:
        raise InvalidArgument("Perdura does not offer global (multi-region) namespaces.")
    retention = 1
    if request.HasField("workflow_execution_retention_period"):
        retention = _retention_days(request.workflow_execution_retention_period.ToTimedelta())
    archival = namespace_services.ArchivalRequest(
        history_state=request.history_archival_state,
        history_uri=request.history_archival_uri,
        visibility_state=request.visibility_archival_state,
        visibility_uri=request.visibility_archival_uri,
    )
    await dbthreads.run(_register, request, auth.current(), retention, archival)
    return rr.RegisterNamespaceResponse()


async def describe_namespace(
    request: rr.DescribeNamespaceRequest, context: grpc.aio.ServicerContext
) -> rr.DescribeNamespaceResponse:
    # One field names the namespace: the interceptor authorised each field that is set, and a request
    # naming it twice is refused as Temporal refuses it, so the answer is always about what was checked.
    if request.id and request.namespace:
        raise InvalidArgument("GetNamespace operation failed.  Both ID and Name specified in request.")
    validation.namespace_id(request.id)
    if request.id:
        namespace = await resolve.namespace_by_id(request.id)
    else:
        namespace = await resolve.namespace(request.namespace, fresh=True)
    return convert.describe_namespace(namespace)


async def list_namespaces(
    request: rr.ListNamespacesRequest, context: grpc.aio.ServicerContext
) -> rr.ListNamespacesResponse:
    """The namespaces the caller may see: all for the operator, a key's own for a key."""
    principal = auth.current()
    names = None if principal.anonymous else principal.namespaces
    namespaces = await dbthreads.run(selectors.namespace_list, names=names)
    if not request.namespace_filter.include_deleted:
        namespaces = [n for n in namespaces if n.state != Namespace.State.DELETED]
    return rr.ListNamespacesResponse(namespaces=[convert.describe_namespace(n) for n in namespaces])


async def update_namespace(
    request: rr.UpdateNamespaceRequest, context: grpc.aio.ServicerContext
) -> rr.UpdateNamespaceResponse:
    namespace = await resolve.namespace(request.namespace, fresh=True)
    replication = request.replication_config
    clusters = {c.cluster_name for c in replication.clusters} | {replication.active_cluster_name}
    if request.promote_namespace or clusters - {"", "active"}:
        raise InvalidArgument("Perdura does not offer global (multi-region) namespaces.")
    retention = None
    asked = request.config.workflow_execution_retention_ttl.ToTimedelta()
    # The CLI sends the namespace's whole config back with any change: the retention it already has
    # (perhaps an operator's, under a day) is no change, not a tenant's request for it.
    if request.config.HasField("workflow_execution_retention_ttl") and asked != namespace.retention:
        retention = _retention_days(asked)
    config = request.config
    archival = namespace_services.ArchivalRequest(
        history_state=config.history_archival_state,
        history_uri=config.history_archival_uri,
        visibility_state=config.visibility_archival_state,
        visibility_uri=config.visibility_archival_uri,
    )
    info = request.update_info
    state = info.state
    if state == NamespaceState.NAMESPACE_STATE_DELETED:
        raise InvalidArgument("A namespace is deleted with OperatorService.DeleteNamespace, not by update.")

    def apply() -> Namespace:
        try:
            updated = namespace_services.namespace_update(
                namespace=namespace,
                description=info.description or None,
                owner_email=info.owner_email or None,
                retention_days=retention,
            )
            updated = namespace_services.namespace_set_archival(namespace=updated, request=archival)
        except errors.NamespaceError as e:
            raise InvalidArgument(str(e)) from None
        if state == NamespaceState.NAMESPACE_STATE_DEPRECATED:
            updated = namespace_services.namespace_deprecate(namespace=updated)
        return updated

    updated = await dbthreads.run(apply)
    info_pb, config, replication = convert.namespace_info(updated)
    return rr.UpdateNamespaceResponse(
        namespace_info=info_pb, config=config, replication_config=replication, is_global_namespace=False
    )


async def deprecate_namespace(
    request: rr.DeprecateNamespaceRequest, context: grpc.aio.ServicerContext
) -> rr.DeprecateNamespaceResponse:
    namespace = await resolve.namespace(request.namespace, fresh=True)
    await dbthreads.run(namespace_services.namespace_deprecate, namespace=namespace)
    return rr.DeprecateNamespaceResponse()


async def delete_namespace(
    request: orr.DeleteNamespaceRequest, context: grpc.aio.ServicerContext
) -> orr.DeleteNamespaceResponse:
    """OperatorService.DeleteNamespace as Temporal answers it: the namespace is marked deleted and renamed
    `<name>-deleted-<hex>` (the name is free again, keys lose it at once); the answer carries the new name.
    Its runs are then deleted in the background through retention (engine/shards/namespace_purge.py), at
    once: `namespace_delete_delay` is not honoured yet."""
    if request.namespace and request.namespace_id:
        raise InvalidArgument("Only one of namespace name or Id should be set on request.")
    if request.namespace:
        namespace = await resolve.namespace(request.namespace, fresh=True)
    elif request.namespace_id:
        validation.namespace_id(request.namespace_id)
        namespace = await resolve.namespace_by_id(request.namespace_id)
    else:
        raise InvalidArgument("Namespace is not set on request.")
    if namespace.state == Namespace.State.DELETED:
        raise FailedPrecondition(f"Namespace {namespace.name} is already deleted.")
    deleted = await dbthreads.run(namespace_services.namespace_delete, namespace=namespace)
    return orr.DeleteNamespaceResponse(deleted_namespace=deleted.name)
