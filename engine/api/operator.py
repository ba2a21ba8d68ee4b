"""The Temporal OperatorService over gRPC: search attribute registration and DeleteNamespace (the rest answers UNIMPLEMENTED)."""

from __future__ import annotations

import grpc
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import request_response_pb2 as orr
from temporalio.api.operatorservice.v1 import service_pb2_grpc as oss

from engine import dbthreads
from engine.api import namespaces
from engine.api.errors import rpc
from engine.errors import InvalidArgument
from tenants.models import Namespace
from visibility import selectors, services
from visibility.search_attributes import SearchAttributeError


async def _namespace(name: str) -> Namespace:
    from engine.api.servicer import _namespace as resolve

    return await resolve(name)


class OperatorService(oss.OperatorServiceServicer):
    """temporal.api.operatorservice.v1.OperatorService. Methods not defined here answer UNIMPLEMENTED."""

    @rpc
    async def AddSearchAttributes(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        if not request.search_attributes:
            raise InvalidArgument("SearchAttributes are not set on request.")
        try:
            await dbthreads.run(
                services.search_attributes_add,
                namespace=namespace,
                attributes={name: int(t) for name, t in request.search_attributes.items()},
            )
        except SearchAttributeError as e:
            raise InvalidArgument(str(e)) from None
        return orr.AddSearchAttributesResponse()

    @rpc
    async def RemoveSearchAttributes(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        if not request.search_attributes:
            raise InvalidArgument("SearchAttributes are not set on request.")
        try:
            await dbthreads.run(
                services.search_attributes_remove, namespace=namespace, names=list(request.search_attributes)
            )
        except SearchAttributeError as e:
            raise InvalidArgument(str(e)) from None
        return orr.RemoveSearchAttributesResponse()

    @rpc
    async def ListSearchAttributes(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        system, custom = await dbthreads.run(selectors.search_attributes_of, namespace_id=namespace.id)
        return orr.ListSearchAttributesResponse(
            system_attributes={n: IndexedValueType.ValueType(int(t)) for n, t in system.items()},
            custom_attributes={n: IndexedValueType.ValueType(int(t)) for n, t in custom.items()},
        )

    @rpc
    async def DeleteNamespace(self, request, context):  # noqa: N802
        return await namespaces.delete(request)


def _unimplemented(name: str):  # type: ignore[no-untyped-def]
    async def handler(self, request, context):  # type: ignore[no-untyped-def]
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"Perdura does not implement {name} yet.")

    handler.__name__ = name
    return handler


for _name, _value in vars(oss.OperatorServiceServicer).items():
    if callable(_value) and not _name.startswith("_") and _name not in vars(OperatorService):
        setattr(OperatorService, _name, _unimplemented(_name))
