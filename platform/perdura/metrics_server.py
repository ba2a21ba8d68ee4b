"""The metrics port of `perdura api`, `perdura worker` and `perdura dev`, and the multiprocess directory.

A process that serves alone records into prometheus-client's default registry and serves it. Where
several processes serve one role (`perdura api --processes N`, the Celery worker and its pool, `perdura
web`'s uvicorn workers), each records into its own files under PROMETHEUS_MULTIPROC_DIR, which must be
set before any of them imports prometheus-client (the supervisor sets it in their environment), and the
one serving the port sums the files at each scrape (prometheus-client's MultiProcessCollector). The
directory is emptied when the role starts, so counters start at zero with it, as Prometheus expects of a
restarted target.

The port answers `/metrics`, `/healthz` (the process serves) and `/readyz` (the database answers, the
schema is current, Redis answers: perdura/health.py), for probes of processes that have no web port.
A port that cannot be bound is logged and left unserved: metrics are not worth refusing to serve calls
for, and several dev or test servers on one machine would otherwise fight over the default.
"""

from __future__ import annotations

import json
import logging
import os
import socketserver
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

if TYPE_CHECKING:
    from prometheus_client.registry import Collector, CollectorRegistry

log = logging.getLogger("perdura.metrics")
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
DEFAULT_PORT = 9464
"""The metrics port of `perdura api` and `perdura worker` (OpenTelemetry's Prometheus exporter's default)."""


def add_flag(parser: Any, *, default: int, what: str) -> None:
    """The `--metrics-port` option of a command (an argparse parser)."""
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=default,
        help=f"serve Prometheus metrics of {what} on this port at /metrics (default {default}; 0 turns it off)",
    )


def prepare_multiprocess(role: str, port: int) -> Path:
    """Make (or empty) the directory the processes of `role` record into and name it in this process's
    environment, which the processes started from here inherit. Call before importing prometheus-client.

    PROMETHEUS_MULTIPROC_DIR, when set, is used as it is (one directory per role and port in it, so that
    the roles of one host may share it); otherwise one under the data directory.
    """
    from perdura import env

    base = Path(os.environ.get(MULTIPROC_ENV) or env.data_dir() / "metrics")
    path = base / f"{role}-{port}"
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.db"):
        stale.unlink(missing_ok=True)
    os.environ[MULTIPROC_ENV] = str(path)
    return path


def multiprocess() -> bool:
    """Whether this process records into a multiprocess directory."""
    return bool(os.environ.get(MULTIPROC_ENV))


def registry(extra: Iterable[Collector] = ()) -> CollectorRegistry:
    """What a scrape of this process reads: every process's files of the directory (multiprocess), or
    this process's default registry; plus `extra` collectors (the engine's state, read at scrape time)."""
    from prometheus_client import REGISTRY, CollectorRegistry
    from prometheus_client import multiprocess as mp

    extra = list(extra)
    if multiprocess():
        served = CollectorRegistry()
        mp.MultiProcessCollector(served)
    elif not extra:
        return REGISTRY
    else:
        served = CollectorRegistry()
        served.register(_Forward(REGISTRY))
    for collector in extra:
        served.register(collector)
    return served


class _Forward:
    """Another registry's samples, collected as one collector of a registry that adds its own."""

    def __init__(self, source: CollectorRegistry) -> None:
        self.source = source

    def collect(self) -> Any:
        return self.source.collect()

    def describe(self) -> list[Any]:
        return []  # checked against nothing: names of the default registry never clash with ours


def child_exited(pid: int) -> None:
    """Drop a dead process's live gauges (its counters stay summed, as they must)."""
    if multiprocess():
        from prometheus_client import multiprocess as mp

        mp.mark_process_dead(pid)


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass  # a scrape every few seconds is not worth a log line


def _app(served: CollectorRegistry) -> Callable[..., Any]:
    from prometheus_client import make_wsgi_app

    metrics = make_wsgi_app(served)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            try:
                return metrics(environ, start_response)
            finally:
                _close_database()
        if path == "/healthz":
            start_response("200 OK", [("Content-Type", "application/json")])
            return [b'{"status": "ok"}']
        if path == "/readyz" and _django_ready():
            from perdura import health

            try:
                ready, body = health.readiness()
            finally:
                _close_database()
            start_response(
                "200 OK" if ready else "503 Service Unavailable", [("Content-Type", "application/json")]
            )
            return [json.dumps(body).encode()]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: the metrics port serves /metrics, /healthz and /readyz\n"]

    return app


def _django_ready() -> bool:
    if "django.apps" not in sys.modules:
        return False
    from django.apps import apps

    return apps.ready


def _close_database() -> None:
    """Each scrape runs on a thread of its own: the connections its collectors opened end with it."""
    if "django.db" in sys.modules:
        from django.db import connections

        connections.close_all()


def bind(host: str, port: int) -> WSGIServer | None:
    """Listen on (`host`, `port`) without serving yet; None if the port is 0 or taken (logged).

    Bind before `prepare_multiprocess`: a second process of a role started on a port in use must not
    empty the directory the first one records into.
    """
    if not port:
        return None
    try:
        return make_server(host, port, _unready, server_class=_Server, handler_class=_Quiet)
    except OSError as e:
        log.warning(
            "metrics not served: cannot listen on %s:%s (%s); pass another --metrics-port", host, port, e
        )
        return None


def _unready(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
    start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
    return [b"starting\n"]


def start(server: WSGIServer | None, *, extra: Iterable[Collector] = ()) -> WSGIServer | None:
    """Serve /metrics, /healthz and /readyz on a bound `server` from a daemon thread (None: nothing)."""
    if server is None:
        return None
    server.set_app(_app(registry(extra)))
    threading.Thread(target=server.serve_forever, name="perdura-metrics", daemon=True).start()
    host, port = server.server_address[:2]
    log.info("Prometheus metrics on http://%s:%s/metrics", host, port)
    return server


def serve(host: str, port: int, *, extra: Iterable[Collector] = ()) -> WSGIServer | None:
    """`bind` and `start`, for a process that records into no shared directory of its own making."""
    return start(bind(host, port), extra=extra)
