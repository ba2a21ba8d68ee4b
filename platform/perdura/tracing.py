"""OpenTelemetry traces of a Perdura process, exported by OTLP (gRPC) when the standard variables ask for it.

Tracing is on when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (and
OTEL_SDK_DISABLED is not true); every other standard variable (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
OTEL_EXPORTER_OTLP_HEADERS, OTEL_BSP_*, OTEL_TRACES_SAMPLER...) is read by the OpenTelemetry SDK itself.
Off, nothing is configured: the API's no-op tracer answers every span, and the gRPC server does not
even install its tracing interceptor (engine/api/server.py), so an installation without a collector pays
nothing on the hot path.

Spans go out in batches from a thread of the SDK's: call `configure` in the process that records them,
after any fork (the Celery pool's processes configure their own, perdura/celery.py).
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("perdura.tracing")
_configured = False


def enabled() -> bool:
    """Whether the environment asks for traces (an OTLP endpoint is named and the SDK is not disabled)."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def configure(service: str) -> bool:
    """Install the OTLP-exporting tracer provider for this process, once; returns whether traces are on.

    Args:
        service: the service name spans carry unless OTEL_SERVICE_NAME says otherwise (`perdura-api`...).
    """
    global _configured
    if _configured:
        return True
    if not enabled():
        return False
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service}
    provider = TracerProvider(resource=Resource.create(attributes))
    # The exporter reads its endpoint, headers, TLS and timeout from the standard variables.
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _configured = True
    log.info("traces exported by OTLP to %s", _endpoint())
    return True


def _endpoint() -> str:
    return os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT", ""
    )
