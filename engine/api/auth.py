"""API-key authentication and per-namespace authorisation of every gRPC call (an aio interceptor).

Each call of a guarded service (engine/api/methods.py) is authenticated from its `authorization:
Bearer <key>` metadata, its namespace is read from the request, and the key's grants are checked
against the method's rule before the handler runs. The handler finds the caller in `current()`.

Unauthenticated calls are allowed only by the loopback allowance (`PERDURA_AUTH=loopback`, the
default of `perdura dev`): a call without credentials from 127.0.0.0/8 or ::1 acts as the operator.
Credentials that are presented are always checked, allowance or not.
"""

from __future__ import annotations

import contextvars
import ipaddress
import logging
from typing import Any

import grpc
from temporalio.api.errordetails.v1 import PermissionDeniedFailure

from engine.api import dbthreads, methods
from engine.api.errors import abort
from engine.errors import EngineError, InvalidArgument, PermissionDenied, Unauthenticated
from tenants import roles
from tenants.auth import ANONYMOUS, AuthError, Principal, authenticate

log = logging.getLogger("perdura.auth")
REQUIRED = "required"
LOOPBACK = "loopback"
MODES = (REQUIRED, LOOPBACK)

_current: contextvars.ContextVar[Principal] = contextvars.ContextVar("perdura_principal", default=ANONYMOUS)


def current() -> Principal:
    """The caller of the RPC being handled (set by the interceptor for the handler's task)."""
    return _current.get()


def is_loopback(peer: str) -> bool:
    """True for a grpc peer string of a loopback or unix-socket client (`ipv4:127.0.0.1:5000`)."""
    kind, _, rest = peer.partition(":")
    if kind == "unix":
        return True
    if kind == "ipv4":
        host = rest.rpartition(":")[0]
    elif kind == "ipv6":
        host = rest.rpartition(":")[0].strip("[]")
    else:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def decide(method: str, rule: methods.Rule | None, principal: Principal, request: Any) -> EngineError | None:
    """Why `principal` may not make this call, or None when it may. Pure: no I/O.

    Args:
        method: the method's short name, for messages.
        rule: its row of the table, None if it has none.
        principal: the authenticated caller.
        request: the decoded request message (its `namespace`, or `id` for DescribeNamespace).
    """
    if principal.anonymous:
        return None
    who = principal.label
    if rule is None:
        return PermissionDenied(
            f"{method} is not open to API keys", PermissionDeniedFailure(reason="no rule")
        )
    if rule.scope is methods.Scope.SYSTEM:
        return PermissionDenied(
            f"{method} changes the whole installation and is not open to API keys",
            PermissionDeniedFailure(reason="system method"),
        )
    if rule.scope is methods.Scope.CLUSTER:
        return None
    namespace = getattr(request, "namespace", "")
    if rule.scope is methods.Scope.REGISTER:
        suffix = f".{principal.organization_slug}"
        if not namespace.endswith(suffix):
            return PermissionDenied(
                f"{who} may only register namespaces of organisation {principal.organization_slug!r}, "
                f"named <name>{suffix}",
                PermissionDeniedFailure(reason="namespace outside the key's organisation"),
            )
        label = namespace
    elif namespace:
        if namespace not in principal.namespaces:
            return PermissionDenied(
                f"{who} has no access to namespace {namespace!r}",
                PermissionDeniedFailure(reason="namespace not granted to this key"),
            )
        label = namespace
    elif method == "DescribeNamespace" and getattr(request, "id", ""):
        if request.id not in principal.namespace_ids:
            return PermissionDenied(
                f"{who} has no access to namespace id {request.id!r}",
                PermissionDeniedFailure(reason="namespace not granted to this key"),
            )
        label = request.id
    else:
        return InvalidArgument("Namespace is not set on request.")
    if not roles.allows(principal.role, rule.access):
        needed = roles.least_role_for(rule.access).value
        return PermissionDenied(
            f"{who} is a {principal.role} key on namespace {label!r}; {method} needs the {needed} role or above",
            PermissionDeniedFailure(reason=f"role {principal.role} below {needed}"),
        )
    return None


def _authorization(details: grpc.HandlerCallDetails) -> str | None:
    for key, value in details.invocation_metadata or ():
        if key == "authorization":
            return value if isinstance(value, str) else value.decode(errors="replace")
    return None


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Authenticates and authorises every call of a guarded service before its handler runs."""

    def __init__(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"PERDURA_AUTH must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        handler = await continuation(handler_call_details)
        full = handler_call_details.method
        if handler is None or handler.unary_unary is None or not methods.guarded(full):
            return handler
        rule = methods.rule_for(full)
        method = full.rpartition("/")[2]
        header = _authorization(handler_call_details)
        behavior = handler.unary_unary

        async def guarded(request, context):  # type: ignore[no-untyped-def]
            principal = await self._principal(header, context, method)
            denial = decide(method, rule, principal, request)
            if denial is not None:
                log.info("denied %s to %s: %s", method, principal.label, denial.code)
                await abort(context, denial)
            token = _current.set(principal)
            try:
                return await behavior(request, context)
            finally:
                _current.reset(token)

        return grpc.unary_unary_rpc_method_handler(
            guarded,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    async def _principal(
        self, header: str | None, context: grpc.aio.ServicerContext, method: str
    ) -> Principal:
        if header is None:
            if self.mode == LOOPBACK and is_loopback(context.peer()):
                return ANONYMOUS
            await abort(
                context,
                Unauthenticated(
                    "this server requires an API key: send `authorization: Bearer <key>` "
                    "(SDK: Client.connect(..., api_key=...); CLI: --api-key)"
                ),
            )
        try:
            return await dbthreads.run(authenticate, header)
        except AuthError as e:
            log.info("refused %s: %s", method, e)
            await abort(context, Unauthenticated(str(e)))
        raise AssertionError("unreachable")
