"""OperatorService's search attribute RPCs: register, remove and list a namespace's custom attributes."""

from __future__ import annotations

import grpc
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import request_response_pb2 as orr

from engine import dbthreads
from engine.api.rpc import resolve
from engine.errors import InvalidArgument
from visibility import selectors, services
from visibility.search_attributes import SearchAttributeError


async def add_search_attributes(
    request: orr.AddSearchAttributesRequest, context: grpc.aio.ServicerContext
) -> orr.AddSearchAttributesResponse:
    namespace = await resolve.namespace(request.namespace)
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


async def remove_search_attributes(
    request: orr.RemoveSearchAttributesRequest, context: grpc.aio.ServicerContext
) -> orr.RemoveSearchAttributesResponse:
    namespace = await resolve.namespace(request.namespace)
    if not request.search_attributes:
        raise InvalidArgument("SearchAttributes are not set on request.")
    try:
        await dbthreads.run(
            services.search_attributes_remove, namespace=namespace, names=list(request.search_attributes)
        )
    except SearchAttributeError as e:
        raise InvalidArgument(str(e)) from None
    return orr.RemoveSearchAttributesResponse()


async def list_search_attributes(
    request: orr.ListSearchAttributesRequest, context: grpc.aio.ServicerContext
) -> orr.ListSearchAttributesResponse:
    namespace = await resolve.namespace(request.namespace)
    system, custom = await dbthreads.run(selectors.search_attributes_of, namespace_id=namespace.id)
    return orr.ListSearchAttributesResponse(
        system_attributes={n: IndexedValueType.ValueType(int(t)) for n, t in system.items()},
        custom_attributes={n: IndexedValueType.ValueType(int(t)) for n, t in custom.items()},
    )
