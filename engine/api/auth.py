"""API-key authentication and per-namespace authorisation of every gRPC call (an aio interceptor).

Each call of a guarded service (engine/api/methods.py) is authenticated from its `authorization:
Bearer <key>` metadata, its namespace is read from the request, and the key's grants are checked
against the method's rule before the handler runs. The handler finds the caller in `current()`.

Unauthenticated calls are allowed only by the loopback allowance (`PERDURA_AUTH=loopback`, the
default of `perdura dev`): a call without credentials from 127.0.0.0/8 or ::1 acts as the operator.
Perdura keys that are presented are always checked, allowance or not. Under the allowance, a loopback
call whose header carries something else (another service's key, which some clients send everywhere)
is treated as one without credentials, as Temporal's dev server ignores such headers.

Failed attempts (unknown, malformed, expired or revoked keys) are counted per client address in a
shared bucket (PERDURA_AUTH_FAILURES at once, then one every 6 seconds); an address whose bucket is
empty is refused with RESOURCE_EXHAUSTED before its key is even looked at, until the bucket refills.
Loopback callers are not counted where the loopback allowance already trusts them.

Audited methods (the `audit` column of the table) run with the caller bound as the audit context
(tenants/audit.py), and the interceptor records them after the call, or when it refuses them, with
the status code (engine/api/audit.py). Calls refused for want of a valid key are not recorded (there
is no actor to name; they are logged and throttled), nor calls refused by the rate limiter.
"""

from __future__ import annotations

import asyncio
import contextvars
import ipaddress
import logging
import time
from typing import Any

import grpc
from perdura import metrics
from perdura.ratelimit import Limiter, Rate
from temporalio.api.enums.v1 import ResourceExhaustedCause, ResourceExhaustedScope
from temporalio.api.errordetails.v1 import PermissionDeniedFailure, ResourceExhaustedFailure

from engine import dbthreads, tokens
from engine.api import audit as audit_calls
from engine.api import errors, methods
from engine.api.aio_types import Continuation, Handler, unary_behavior
from engine.api.errors import abort
from engine.errors import EngineError, InvalidArgument, PermissionDenied, ResourceExhausted, Unauthenticated
from tenants import api_keys, audit, roles
from tenants.auth import ANONYMOUS, AuthError, Principal, authenticate

log = logging.getLogger("perdura.auth")
REQUIRED = "required"
LOOPBACK = "loopback"
MODES = (REQUIRED, LOOPBACK)
FAILURE_REFILL_SECONDS = 6.0

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


def source_of(peer: str) -> str:
    """The client address of a grpc peer string, without its port (`ipv4:10.0.0.7:5000` → `10.0.0.7`)."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        return rest.rpartition(":")[0].strip("[]")
    return peer


def decide(method: str, rule: methods.Rule | None, principal: Principal, request: Any) -> EngineError | None:
    """Why `principal` may not make this call, or None when it may. Pure: no I/O.

    Args:
        method: the method's short name, for messages.
        rule: its row of the table, None if it has none.
        principal: the authenticated caller.
        request: the decoded request message: every target field of the rule that is set is checked
            (the key must cover each namespace named, and the fields naming what the call acts on must
            name the same one), so the handler acts only on an authorised namespace.
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
    if rule.scope is methods.Scope.REGISTER:
        namespace = request.namespace
        suffix = f".{principal.organization_slug}"
        if not namespace.endswith(suffix):
            return PermissionDenied(
                f"{who} may only register namespaces of organisation {principal.organization_slug!r}, "
                f"named <name>{suffix}",
                PermissionDeniedFailure(reason="namespace outside the key's organisation"),
            )
        label = repr(namespace)
    else:
        named = _named(rule, principal, request)
        if not any(target.top for target, _, _ in named):
            return InvalidArgument("Namespace is not set on request.")
        acted_on: dict[str, str] = {}  # namespace id -> the field naming it, of those naming what it acts on
        for target, shown, namespace_id in named:
            if namespace_id is None:
                return PermissionDenied(
                    f"{who} has no access to namespace {shown} (request field {target.path})",
                    PermissionDeniedFailure(reason="namespace not granted to this key"),
                )
            if target.agree:
                acted_on.setdefault(namespace_id, f"{target.path} {shown}")
        if len(acted_on) > 1:
            first, second = list(acted_on.values())[:2]
            return InvalidArgument(
                f"The request names two namespaces: {first} and {second}; a call acts on one namespace."
            )
        label = next(shown for target, shown, _ in named if target.top)
    if not roles.allows(principal.role, rule.access):
        needed = roles.least_role_for(rule.access).value
        return PermissionDenied(
            f"{who} is a {principal.role} key on namespace {label}; {method} needs the {needed} role or above",
            PermissionDeniedFailure(reason=f"role {principal.role} below {needed}"),
        )
    return None


def _named(
    rule: methods.Rule, principal: Principal, request: Any
) -> list[tuple[methods.Target, str, str | None]]:
    """Each target field set in `request`: (target, how to show its value, the id of the namespace it names
    if the key covers it, else None). A task token this server cannot read names nothing: its handler
    refuses it."""
    named: list[tuple[methods.Target, str, str | None]] = []
    for target in rule.targets:
        for value in methods.values_at(request, target.path):
            if target.kind is methods.Kind.NAME:
                named.append((target, repr(value), principal.namespace_id_of(value)))
            elif target.kind is methods.Kind.ID:
                covered = value if value in principal.namespace_ids else None
                named.append((target, f"id {value!r}", covered))
            else:
                try:
                    token_namespace = tokens.decode(value).namespace_id
                except EngineError:
                    continue
                covered = token_namespace if token_namespace in principal.namespace_ids else None
                named.append((target, f"id {token_namespace!r}", covered))
    return named


_UNKNOWN, _CANCELLED = grpc.StatusCode.UNKNOWN, grpc.StatusCode.CANCELLED
_CODES = {c.value[0]: c for c in grpc.StatusCode}


def _status(context: grpc.aio.ServicerContext, default: grpc.StatusCode) -> grpc.StatusCode:
    """The status the call ends with: the code the handler set or aborted with, else `default`."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if isinstance(code, int):
        return _CODES.get(code, default)
    return default


def _authorization(metadata: Any) -> str | None:
    for key, value in metadata or ():
        if key == "authorization":
            return value if isinstance(value, str) else value.decode(errors="replace")
    return None


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Authenticates and authorises every call of a guarded service before its handler runs."""

    def __init__(
        self, mode: str, *, failures: Limiter | None = None, failure_burst: int | None = None
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"PERDURA_AUTH must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        self.failures = failures
        if failure_burst is None:
            from django.conf import settings

            failure_burst = settings.PERDURA_AUTH_FAILURES
        self.failure_rate = Rate(per_second=1 / FAILURE_REFILL_SECONDS, burst=failure_burst)
        self._wrapped: dict[str, tuple[Handler, Handler]] = {}
        """Each guarded method's handler, wrapped once."""
        self._blocked: dict[str, float] = {}
        """Addresses whose failure bucket is empty, until when (monotonic): refused without a lookup."""

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        full = handler_call_details.method
        if handler is None or handler.unary_unary is None or not methods.guarded(full):
            return handler
        wrapped = self._wrapped.get(full)
        if wrapped is None or wrapped[0] is not handler:
            wrapped = self._wrapped[full] = (handler, self._wrap(handler, full))
        return wrapped[1]

    def _wrap(self, handler: Handler, full: str) -> Handler:
        """The method's handler behind the check, built once per method (the call's key is read inside)."""
        rule = methods.rule_for(full)
        method = full.rpartition("/")[2]
        behavior = unary_behavior(handler)
        audit_mode = rule.audit if rule is not None else methods.Audit.NONE
        audited = audit_mode is not methods.Audit.NONE

        async def guarded(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            principal = await self._principal(_authorization(context.invocation_metadata()), context, method)
            denial = decide(method, rule, principal, request)
            if denial is not None:
                log.info("denied %s to %s: %s", method, principal.label, denial.code)
                if denial.code == "PERMISSION_DENIED":  # not a malformed request's INVALID_ARGUMENT
                    metrics.auth_failures.labels("grpc", "denied").inc()
                if audited:
                    who = audit_calls.context_for(principal, source_of(context.peer()))
                    code = getattr(grpc.StatusCode, denial.code)
                    await audit_calls.record_call(method, who, principal, request, code)
                await abort(context, denial)
            token = _current.set(principal)
            if not audited:
                try:
                    return await behavior(request, context)
                finally:
                    _current.reset(token)
            who = audit_calls.context_for(principal, source_of(context.peer()))
            bound = audit.bind(who)
            code = grpc.StatusCode.UNKNOWN
            recorded = False
            entry = expected = None
            if method in audit_calls.WRITTEN_WITH_THE_CHANGE:
                entry = audit.PendingEntry(
                    lambda: audit_calls.write_ok(method, who, principal, request)  # noqa: B023
                )
                expected = audit.expect(entry)

            async def record(ended: grpc.StatusCode) -> None:
                # CHANGE methods were recorded by their service when they succeeded, and the hot run
                # operations with their change if it committed (an outcome after that, such as a caller
                # who went away, does not undo it); a refusal by the rate limiter changed nothing and
                # would turn a flood into as many inserts.
                nonlocal recorded
                if recorded or ended is grpc.StatusCode.RESOURCE_EXHAUSTED:
                    return
                if entry is not None and entry.written:
                    return
                recorded = True
                if audit_mode is methods.Audit.CALL or ended is not grpc.StatusCode.OK:
                    await audit_calls.record_call(method, who, principal, request, ended)

            # A failure is recorded before its status leaves (engine/api/errors.py `aborting`).
            hooked = errors.before_failure.set(record)
            try:
                response = await behavior(request, context)
                code = _status(context, grpc.StatusCode.OK)
                return response
            except BaseException as e:
                code = _status(context, _CANCELLED if isinstance(e, asyncio.CancelledError) else _UNKNOWN)
                raise
            finally:
                errors.before_failure.reset(hooked)
                if expected is not None:
                    audit.unexpect(expected)
                audit.unbind(bound)
                _current.reset(token)
                await record(code)

        return grpc.unary_unary_rpc_method_handler(
            guarded,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    async def _principal(
        self, header: str | None, context: grpc.aio.ServicerContext, method: str
    ) -> Principal:
        trusted = self.mode == LOOPBACK and is_loopback(context.peer())
        if trusted and header is not None and not api_keys.claims_perdura(header):
            header = None  # not meant for us: the allowance trusts the caller as without a header
        if header is None:
            if trusted:
                return ANONYMOUS
            metrics.auth_failures.labels("grpc", "missing").inc()
            await abort(
                context,
                Unauthenticated(
                    "this server requires an API key: send `authorization: Bearer <key>` "
                    "(SDK: Client.connect(..., api_key=...); CLI: --api-key)"
                ),
            )
        peer = context.peer()
        counted = self.failures is not None and not (self.mode == LOOPBACK and is_loopback(peer))
        source = source_of(peer)
        if counted:
            await self._refuse_if_blocked(context, source)
        try:
            return await dbthreads.run(authenticate, header)
        except AuthError as e:
            log.info("refused %s from %s: %s", method, source, e)
            metrics.auth_failures.labels("grpc", "invalid").inc()
            if counted:
                await self._count_failure(source)
            await abort(context, Unauthenticated(str(e)))
        raise AssertionError("unreachable")

    async def _refuse_if_blocked(self, context: grpc.aio.ServicerContext, source: str) -> None:
        until = self._blocked.get(source)
        if until is None:
            return
        wait = until - time.monotonic()
        if wait <= 0:
            del self._blocked[source]
            return
        metrics.auth_failures.labels("grpc", "throttled").inc()
        await abort(
            context,
            ResourceExhausted(
                f"too many failed API-key attempts from {source}; retry in {wait:.0f}s",
                ResourceExhaustedFailure(
                    cause=ResourceExhaustedCause.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT,
                    scope=ResourceExhaustedScope.RESOURCE_EXHAUSTED_SCOPE_SYSTEM,
                ),
            ),
        )

    async def _count_failure(self, source: str) -> None:
        assert self.failures is not None
        decision = await self.failures.acquire(f"authfail:{source}", self.failure_rate)
        if not decision.allowed:
            if len(self._blocked) > 10_000:
                now = time.monotonic()
                self._blocked = {s: t for s, t in self._blocked.items() if t > now}
            self._blocked[source] = time.monotonic() + decision.retry_after
            log.warning(
                "API-key failures from %s: refusing that address for %.0fs", source, decision.retry_after
            )
