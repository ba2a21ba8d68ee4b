"""The gRPC server (Temporal's 'frontend'): WorkflowService plus the standard health service."""

from __future__ import annotations

import logging

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from engine import dbthreads
from engine.api import errors, generated
from engine.api.auth import AuthInterceptor
from engine.api.edge import EdgeInterceptor
from engine.api.metrics import MetricsInterceptor
from engine.api.ratelimits import NamespaceLimits, RateLimitInterceptor, ShedInterceptor
from engine.api.servicer import OperatorService, WorkflowService
from engine.api.tracing import TracingInterceptor
from engine.services import recent_events

log = logging.getLogger("perdura.api")
MAX_MESSAGE_BYTES = 128 * 1024 * 1024


class Health(health_pb2_grpc.HealthServicer):
    """grpc.health.v1: this process serves the WorkflowService while it accepts calls at all."""

    SERVICES = frozenset(
        {
            "",
            "temporal.api.workflowservice.v1.WorkflowService",
            "temporal.api.operatorservice.v1.OperatorService",
        }
    )

    async def Check(self, request, context):  # noqa: N802
        if request.service not in self.SERVICES:
            await context.abort(
                grpc.StatusCode.NOT_FOUND, errors.bounded(f"unknown service {request.service!r}")
            )
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)


def _tls_credentials(cert: str, key: str) -> grpc.ServerCredentials | None:
    """Server credentials from PEM files (the certificate may carry its chain), or None for plaintext."""
    if not cert and not key:
        return None
    if not (cert and key):
        raise SystemExit("TLS needs both a certificate and its key (--tls-cert and --tls-key)")
    try:
        with open(cert, "rb") as c, open(key, "rb") as k:
            pair = (k.read(), c.read())
    except OSError as e:
        raise SystemExit(f"cannot read the TLS certificate or key: {e}") from None
    return grpc.ssl_server_credentials([pair])


def build(address: str, *, db_threads: int = 16, share_port: bool = False) -> grpc.aio.Server:
    """A grpc.aio server bound to `address` (host:port), not yet started. With `share_port`, sibling
    processes bind the same port (SO_REUSEPORT) and the kernel spreads connections over them; without it,
    a port already in use is an error.

    Every WorkflowService and OperatorService call passes the API-key check (engine/api/auth.py) in
    the mode of the PERDURA_AUTH setting, then its namespace's rate limit (engine/api/ratelimits.py,
    buckets where PERDURA_RATE_LIMITS says); a namespace's calls while its bucket is known to be empty
    are refused before either (ShedInterceptor). The health service stays open to load balancers.
    Outermost of all, EdgeInterceptor decodes and bounds each request (engine/bounds.py), so that an
    undecodable or out-of-bounds one is answered INVALID_ARGUMENT before any of these sees it.
    MetricsInterceptor wraps all of them, so every call is counted and timed with the code it ends with
    (engine/api/metrics.py); inside it, when traces are on (perdura/tracing.py), TracingInterceptor opens
    each call's server span (engine/api/tracing.py), so the log lines of the call carry its trace id.
    """
    from django.conf import settings
    from perdura import ratelimit, tracing

    dbthreads.configure(db_threads)
    recent_events.enable()
    # Installations sharing one Redis (test sessions, say) keep their buckets apart by database name.
    limiter = ratelimit.build(
        settings.PERDURA_RATE_LIMITS,
        redis_url=settings.PERDURA_REDIS_URL,
        prefix=f"perdura:rl:{settings.DATABASES['default']['NAME']}:",
    )
    limits = NamespaceLimits(limiter)
    # Traces only when an OTLP endpoint is configured: otherwise no interceptor, no cost.
    traced = [TracingInterceptor()] if tracing.configure("perdura-api") else []
    server = grpc.aio.server(
        interceptors=[
            MetricsInterceptor(),
            *traced,
            EdgeInterceptor(),
            ShedInterceptor(limits),
            AuthInterceptor(settings.PERDURA_AUTH, failures=limiter),
            RateLimitInterceptor(limits),
        ],
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 1 if share_port else 0),
        ],
    )
    generated.add_WorkflowServiceServicer_to_server(WorkflowService(), server)
    generated.add_OperatorServiceServicer_to_server(OperatorService(), server)
    # The standard health service, which load balancers and `client.service_client.check_health()` ask.
    health_pb2_grpc.add_HealthServicer_to_server(Health(), server)
    tls = _tls_credentials(settings.PERDURA_TLS_CERT, settings.PERDURA_TLS_KEY)
    bound = server.add_secure_port(address, tls) if tls else server.add_insecure_port(address)
    if bound == 0:
        raise SystemExit(f"cannot listen on {address}: is another server using that port?")
    log.info(
        "gRPC API listening on %s (%s, auth: %s, rate limits: %s)",
        address,
        "TLS" if tls else "plaintext",
        settings.PERDURA_AUTH,
        settings.PERDURA_RATE_LIMITS,
    )
    return server
