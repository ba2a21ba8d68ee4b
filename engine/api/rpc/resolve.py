"""What a request names, resolved once for every RPC family: its namespace and its task token."""

from __future__ import annotations

from temporalio.api.errordetails.v1 import NamespaceNotFoundFailure

from engine import dbthreads, tokens
from engine.errors import InvalidArgument, NotFound
from tenants.models import Namespace
from tenants.selectors import namespace_by_name, namespace_cached


def _fresh_by_name(name: str) -> Namespace | None:
    return Namespace.objects.filter(name=name).first()


async def namespace(name: str, *, fresh: bool = False) -> Namespace:
    """The namespace called `name`; `fresh` reads it past the few-second cache, for namespace calls that
    answer with or change the namespace itself.

    Raises:
        InvalidArgument: no name.
        NotFound: no such namespace (with Temporal's NamespaceNotFoundFailure).
    """
    if not name:
        raise InvalidArgument("Namespace is not set on request.")
    found = None if fresh else namespace_cached(name)
    if found is None:
        found = await dbthreads.run(_fresh_by_name if fresh else namespace_by_name, name)
    if found is None:
        raise NotFound(f"Namespace {name} is not found.", NamespaceNotFoundFailure(namespace=name))
    return found


async def namespace_by_id(namespace_id: str) -> Namespace:
    """The namespace with this id (checked well formed by the caller), read past the cache.

    Raises:
        NotFound: no such namespace.
    """
    found = await dbthreads.run(lambda: Namespace.objects.filter(id=namespace_id).first())
    if found is None:
        raise NotFound(f"Namespace {namespace_id} is not found.")
    return found


def task_token(namespace: Namespace, data: bytes) -> tokens.TaskToken:
    """The task token a worker sent back, checked to belong to `namespace`."""
    if not data:
        raise InvalidArgument("Task token not set on request.")
    token = tokens.decode(data)
    if token.namespace_id != str(namespace.id):
        # A token from another namespace names nothing here: same answer as a stale one.
        raise InvalidArgument("Task token does not belong to this namespace.")
    return token
