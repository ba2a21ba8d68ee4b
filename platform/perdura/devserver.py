"""`perdura dev`: the gRPC API, the shard processing and the web app (console, REST API) in one process on SQLite."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger("perdura.dev")


def configure(
    *,
    db_file: str | None,
    ephemeral: bool,
    require_auth: bool = False,
    tls_cert: str | None = None,
    tls_key: str | None = None,
) -> Path | None:
    """Point settings at the dev SQLite file before Django starts; returns a temp dir to clean up."""
    os.environ["PERDURA_DEV"] = "1"
    if tls_cert or tls_key:
        os.environ["PERDURA_TLS_CERT"] = tls_cert or ""
        os.environ["PERDURA_TLS_KEY"] = tls_key or ""
    if require_auth:
        # Like production: no loopback allowance, every call needs an API key.
        os.environ["PERDURA_AUTH"] = "required"
    temp = None
    if ephemeral:
        temp = Path(tempfile.mkdtemp(prefix="perdura-dev-"))
        os.environ["PERDURA_DATABASE_URL"] = f"sqlite:///{temp / 'perdura.sqlite3'}"
        os.environ.setdefault("PERDURA_DATA_DIR", str(temp))
    elif db_file:
        path = Path(db_file).resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        os.environ["PERDURA_DATABASE_URL"] = f"sqlite:///{path}"
        # The generated master key stays beside the database it unlocks.
        os.environ.setdefault("PERDURA_DATA_DIR", str(path.parent))
    else:
        from perdura import env

        env.data_dir().mkdir(parents=True, exist_ok=True)
    return temp


def prepare() -> None:
    from django.core.management import call_command

    from perdura import bootstrap

    bootstrap.setup()
    call_command("migrate", verbosity=0, interactive=False)
    from tenants.services.namespaces import namespace_ensure

    namespace_ensure(name="default")


class _Web:
    """The web app under uvicorn (ASGI, as `perdura web`), on a thread with its own event loop so that
    page rendering never holds up the gRPC loop; uvicorn installs no signal handlers off the main thread,
    so Ctrl-C stays with `serve`."""

    def __init__(self, host: str, port: int) -> None:
        import uvicorn

        from perdura import logs
        from perdura.asgi import application

        # In the JSON format uvicorn's lines go through the same handler as ours; its own otherwise.
        log_settings: dict[str, Any] = {"log_config": logs.uvicorn_config()} if logs.is_json() else {}
        config = uvicorn.Config(
            application,
            host=host,
            port=port,
            log_level="warning",
            **log_settings,
            access_log=False,
            lifespan="off",
            proxy_headers=False,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="perdura-web", daemon=True)
        self.thread.start()

    def shutdown(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)


def _serve_web(host: str, port: int) -> _Web:
    return _Web(host, port)


async def serve(*, host: str, port: int, ui_port: int, metrics_port: int = 0) -> None:
    from engine.api import server as api_server
    from engine.shards import budget, scrape
    from engine.shards.loop import dev_owner_name, run_timer_loop
    from perdura import heap, logs, metrics_server, shutdown, tracing

    tracing.configure("perdura-dev")  # before the gRPC server is built, which installs its interceptor then
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def request_stop() -> None:
        if stop.is_set():
            return
        # Shard passes end after the row in hand; whatever still hangs is cut by the watchdog.
        budget.stop_requested.set()
        stop.set()
        shutdown.arm_watchdog("perdura dev")

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, request_stop)
    # SQLite has one writer: the event loop takes the database work one call at a time, instead of
    # threads queueing in SQLite's busy handler, whose sleeps (up to 100 ms) would dominate latency.
    grpc_server = api_server.build(f"{host}:{port}", db_threads=0)
    await grpc_server.start()
    metrics_http = metrics_server.serve(host, metrics_port, extra=[scrape.EngineState()])
    web = _serve_web(host, ui_port) if ui_port else None
    heap.freeze_startup_objects()
    timers = asyncio.ensure_future(run_timer_loop(stop, owner=dev_owner_name(), purge=True))
    logs.announce(
        log, f"Perdura dev server: gRPC on {host}:{port}, web on http://{host}:{ui_port}, namespace 'default'"
    )
    await stop.wait()
    logs.announce(log, "Stopping...")
    await grpc_server.stop(grace=2)
    try:
        await asyncio.wait_for(timers, timeout=3)
    except TimeoutError:
        log.warning("the timer loop did not finish its pass in time; stopping without it")
    if web is not None:
        web.shutdown()
    if metrics_http is not None:
        metrics_http.shutdown()


def run(
    *,
    host: str,
    port: int,
    ui_port: int,
    db_file: str | None,
    ephemeral: bool,
    require_auth: bool = False,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    metrics_port: int = 0,
) -> None:
    temp = configure(
        db_file=db_file, ephemeral=ephemeral, require_auth=require_auth, tls_cert=tls_cert, tls_key=tls_key
    )
    # The address the console's connection snippets name (settings.PERDURA_API_ADDRESS).
    os.environ.setdefault(
        "PERDURA_API_ADDRESS", f"{'localhost' if host in ('0.0.0.0', '::') else host}:{port}"
    )
    try:
        prepare()
        asyncio.run(serve(host=host, port=port, ui_port=ui_port, metrics_port=metrics_port))
    finally:
        if temp is not None:
            import shutil

            shutil.rmtree(temp, ignore_errors=True)
