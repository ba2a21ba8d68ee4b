"""Namespace RPCs: register, describe, list, update, deprecate (WorkflowService) and delete (OperatorService).

The interceptor (engine/api/auth.py) has already checked the caller's access; what a caller may
*see* (ListNamespaces) and which organisation a new namespace joins depend on the caller too.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.api.enums.v1 import ArchivalState, NamespaceState
from temporalio.api.errordetails.v1 import NamespaceAlreadyExistsFailure, NamespaceNotFoundFailure
from temporalio.api.namespace.v1 import NamespaceConfig, NamespaceInfo
from temporalio.api.operatorservice.v1 import request_response_pb2 as orr
from temporalio.api.replication.v1 import ClusterReplicationConfig, NamespaceReplicationConfig
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads, validation
from engine.api import auth
from engine.api.convert import dur
from engine.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from tenants import errors, selectors
from tenants.auth import Principal
from tenants.models import ApiKey, Namespace, Organization
from tenants.services import namespaces as namespace_services


def namespace_info(namespace: Namespace) -> tuple[NamespaceInfo, NamespaceConfig, NamespaceReplicationConfig]:
    """A namespace as Temporal describes it (never any key material)."""
    info = NamespaceInfo(
        name=namespace.name,
        state=NamespaceState.ValueType(namespace.state),
        description=namespace.description,
        owner_email=namespace.owner_email,
        id=str(namespace.id),
        capabilities=NamespaceInfo.Capabilities(
            eager_workflow_start=True, sync_update=True, async_update=True
        ),
    )
    config = NamespaceConfig(workflow_execution_retention_ttl=dur(namespace.retention_days * 86400.0))
    replication = NamespaceReplicationConfig(
        active_cluster_name="active", clusters=[ClusterReplicationConfig(cluster_name="active")]
    )
    return info, config, replication


def describe_response(namespace: Namespace) -> rr.DescribeNamespaceResponse:
    info, config, replication = namespace_info(namespace)
    return rr.DescribeNamespaceResponse(
        namespace_info=info, config=config, replication_config=replication, is_global_namespace=False
    )


def _retention_days(duration: timedelta) -> int:
    days, rest = divmod(duration, timedelta(days=1))
    if rest or not 1 <= days <= 90:
        shown = f"{days}d" if not rest else f"{duration.total_seconds() / 3600:g}h"
        raise InvalidArgument(f"retention must be a whole number of days between 1 and 90, not {shown}")
    return days


async def _by_name(name: str) -> Namespace:
    if not name:
        raise InvalidArgument("Namespace is not set on request.")
    namespace = await dbthreads.run(lambda: Namespace.objects.filter(name=name).first())
    if namespace is None:
        raise NotFound(f"Namespace {name} is not found.", NamespaceNotFoundFailure(namespace=name))
    return namespace


def _register(request: rr.RegisterNamespaceRequest, principal: Principal, retention_days: int) -> None:
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


async def register(request: rr.RegisterNamespaceRequest) -> rr.RegisterNamespaceResponse:
    if not request.namespace:
        raise InvalidArgument("Namespace is not set on request.")
    if request.is_global_namespace:
        raise InvalidArgument("Perdura does not offer global (multi-region) namespaces.")
    enabled = ArchivalState.ARCHIVAL_STATE_ENABLED
    if enabled in (request.history_archival_state, request.visibility_archival_state):
        raise InvalidArgument("Perdura does not offer archival yet.")
    retention = 1
    if request.HasField("workflow_execution_retention_period"):
        retention = _retention_days(request.workflow_execution_retention_period.ToTimedelta())
    await dbthreads.run(_register, request, auth.current(), retention)
    return rr.RegisterNamespaceResponse()


async def describe(request: rr.DescribeNamespaceRequest) -> rr.DescribeNamespaceResponse:
    # One field names the namespace: the interceptor authorised each field that is set, and a request
    # naming it twice is refused as Temporal refuses it, so the answer is always about what was checked.
    if request.id and request.namespace:
        raise InvalidArgument("GetNamespace operation failed.  Both ID and Name specified in request.")
    validation.namespace_id(request.id)
    if request.id:
        namespace = await dbthreads.run(lambda: Namespace.objects.filter(id=request.id).first())
        if namespace is None:
            raise NotFound(f"Namespace {request.id} is not found.")
    else:
        namespace = await _by_name(request.namespace)
    return describe_response(namespace)


async def list_namespaces(request: rr.ListNamespacesRequest) -> rr.ListNamespacesResponse:
    """The namespaces the caller may see: all for the operator, a key's own for a key."""
    principal = auth.current()
    names = None if principal.anonymous else principal.namespaces
    namespaces = await dbthreads.run(selectors.namespace_list, names=names)
    if not request.namespace_filter.include_deleted:
        namespaces = [n for n in namespaces if n.state != Namespace.State.DELETED]
    return rr.ListNamespacesResponse(namespaces=[describe_response(n) for n in namespaces])


async def update(request: rr.UpdateNamespaceRequest) -> rr.UpdateNamespaceResponse:
    namespace = await _by_name(request.namespace)
    replication = request.replication_config
    clusters = {c.cluster_name for c in replication.clusters} | {replication.active_cluster_name}
    if request.promote_namespace or clusters - {"", "active"}:
        raise InvalidArgument("Perdura does not offer global (multi-region) namespaces.")
    retention = None
    if request.config.HasField("workflow_execution_retention_ttl"):
        retention = _retention_days(request.config.workflow_execution_retention_ttl.ToTimedelta())
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
        except errors.NamespaceError as e:
            raise InvalidArgument(str(e)) from None
        if state == NamespaceState.NAMESPACE_STATE_DEPRECATED:
            updated = namespace_services.namespace_deprecate(namespace=updated)
        return updated

    updated = await dbthreads.run(apply)
    info_pb, config, replication = namespace_info(updated)
    return rr.UpdateNamespaceResponse(
        namespace_info=info_pb, config=config, replication_config=replication, is_global_namespace=False
    )


async def deprecate(request: rr.DeprecateNamespaceRequest) -> rr.DeprecateNamespaceResponse:
    namespace = await _by_name(request.namespace)
    await dbthreads.run(namespace_services.namespace_deprecate, namespace=namespace)
    return rr.DeprecateNamespaceResponse()


async def delete(request: orr.DeleteNamespaceRequest) -> orr.DeleteNamespaceResponse:
    """OperatorService.DeleteNamespace as Temporal answers it: the namespace is marked deleted and renamed
    `<name>-deleted-<hex>` (the name is free again, keys lose it at once); the answer carries the new name.
    Runs are kept (Perdura does not purge them yet), so `namespace_delete_delay` changes nothing."""
    if request.namespace and request.namespace_id:
        raise InvalidArgument("Only one of namespace name or Id should be set on request.")
    if request.namespace:
        namespace = await _by_name(request.namespace)
    elif request.namespace_id:
        validation.namespace_id(request.namespace_id)
        namespace = await dbthreads.run(lambda: Namespace.objects.filter(id=request.namespace_id).first())
        if namespace is None:
            raise NotFound(f"Namespace {request.namespace_id} is not found.")
    else:
        raise InvalidArgument("Namespace is not set on request.")
    if namespace.state == Namespace.State.DELETED:
        raise FailedPrecondition(f"Namespace {namespace.name} is already deleted.")
    deleted = await dbthreads.run(namespace_services.namespace_delete, namespace=namespace)
    return orr.DeleteNamespaceResponse(deleted_namespace=deleted.name)
