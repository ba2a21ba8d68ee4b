"""The `perdura` command: dev server, production processes, migrations and operator helpers."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client.registry import Collector


def _cmd_dev(args: argparse.Namespace) -> None:
    from perdura import devserver

    devserver.run(
        host=args.ip,
        port=args.port,
        ui_port=args.ui_port,
        db_file=args.db_file,
        ephemeral=args.ephemeral,
        require_auth=args.require_auth,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        metrics_port=args.metrics_port,
    )


def _cmd_migrate(args: argparse.Namespace) -> None:
    from perdura import bootstrap

    bootstrap.setup()
    from django.core.management import call_command

    from perdura import logs

    # Django's progress lines are for a terminal; in the JSON format one logged line says it is done.
    call_command("migrate", interactive=False, verbosity=0 if logs.is_json() else 1)
    from tenants.services.namespaces import namespace_ensure

    namespace_ensure(name="default")
    if logs.is_json():
        logging.getLogger("perdura.migrate").info("the schema is up to date")


def _tls_env(args: argparse.Namespace) -> None:
    if args.tls_cert or args.tls_key:
        os.environ["PERDURA_TLS_CERT"] = args.tls_cert or ""
        os.environ["PERDURA_TLS_KEY"] = args.tls_key or ""


def _at_least_one(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number is needed, not {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"at least 1 is needed, not {n}")
    return n


def _tls_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tls-cert", help="serve gRPC over TLS with this PEM certificate (PERDURA_TLS_CERT)")
    parser.add_argument("--tls-key", help="the PEM private key of --tls-cert (PERDURA_TLS_KEY)")


def _cmd_api(args: argparse.Namespace) -> None:
    _tls_env(args)
    from perdura import supervise

    if args.processes < 1:
        raise SystemExit("--processes must be at least 1")
    from perdura import metrics_server

    # The port is taken first, then the directory emptied (see metrics_server.bind), before anything
    # imports prometheus-client: this process (or its children) record there.
    metrics_http = None if supervise.is_child() else metrics_server.bind(args.ip, args.metrics_port)
    if metrics_http is not None and (args.processes > 1 or metrics_server.multiprocess()):
        metrics_server.prepare_multiprocess("api", args.metrics_port)
    if args.processes > 1 and not supervise.is_child():
        # One interpreter serves gRPC on one core at most: N children share the port (SO_REUSEPORT), the
        # kernel spreads connections over them, and each is started again if it dies. The supervisor
        # serves the metrics port, summing what the children record (perdura/metrics_server.py).
        raise SystemExit(
            supervise.run(
                supervise.main_argv(),
                [supervise.Child("api", "an API process")] * args.processes,
                on_start=lambda: _serve_supervisor_metrics(metrics_http),
                child_exited=metrics_server.child_exited,
            )
        )
    from perdura import bootstrap

    bootstrap.setup()
    metrics_server.start(metrics_http)
    from engine.api import server as api_server
    from engine.api.listener import start_listener
    from perdura import heap, logs, shutdown

    async def main() -> None:
        server = api_server.build(
            f"{args.ip}:{args.port}", db_threads=args.db_threads, share_port=args.processes > 1
        )
        await server.start()
        start_listener()
        heap.freeze_startup_objects()
        stop = asyncio.Event()

        def request_stop() -> None:
            if not stop.is_set():
                stop.set()
                shutdown.arm_watchdog("perdura api")

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, request_stop)
        logs.announce(logging.getLogger("perdura.api"), f"Perdura API on {args.ip}:{args.port}")
        await stop.wait()
        # Calls in flight (long polls included) get a few seconds; new ones are refused meanwhile.
        await server.stop(grace=3)

    asyncio.run(main())


def _serve_supervisor_metrics(metrics_http: WSGIServer | None, *extra: Collector) -> None:
    """Serve the metrics port of a supervisor (`perdura api --processes N`, `perdura worker`): the sum of
    what its children record, plus `extra` collectors. Django is set up for /readyz."""
    if metrics_http is None:
        return
    from perdura import bootstrap, metrics_server

    bootstrap.setup()
    metrics_server.start(metrics_http, extra=extra)


def _cmd_web(args: argparse.Namespace) -> None:
    if not os.environ.get("PERDURA_SECRET_KEY"):
        # Sessions, CSRF tokens and password reset links are signed with it: every worker and replica
        # must share one, or a login made on one is unknown to the next.
        raise SystemExit("perdura web needs PERDURA_SECRET_KEY (e.g. `perdura masterkey` output)")
    from perdura import metrics_server

    if args.workers > 1 or metrics_server.multiprocess():
        # Each uvicorn worker records into the directory; whichever answers /metrics sums them all.
        metrics_server.prepare_multiprocess("web", args.port)
    argv = [sys.executable, "-m", "uvicorn", "perdura.asgi:application", "--host", args.ip]
    argv += ["--port", str(args.port), "--workers", str(args.workers), "--no-access-log"]
    from perdura import logs

    if logs.is_json():
        argv += ["--log-config", logs.uvicorn_config_file()]
    os.execv(sys.executable, [*argv, *args.extra])


def _cmd_worker(args: argparse.Namespace) -> None:
    from perdura import supervise

    if not supervise.is_child():
        # The Celery worker and the shard loop run as children, each started again if it dies (see
        # perdura/supervise.py). The supervisor serves the metrics port: the sum of what the children and
        # the pool processes record, and the engine's backlogs read at scrape time (engine/shards/scrape.py).
        from perdura import metrics_server

        metrics_http = metrics_server.bind("0.0.0.0", args.metrics_port)
        if metrics_http is not None:
            metrics_server.prepare_multiprocess("worker", args.metrics_port)

        def serve_metrics() -> None:
            if metrics_http is None:
                return
            from perdura import bootstrap

            bootstrap.setup()
            from engine.shards.scrape import EngineState

            _serve_supervisor_metrics(metrics_http, EngineState())

        raise SystemExit(
            supervise.run(
                supervise.main_argv(),
                [
                    supervise.Child(SHARD_LOOP, "the shard loop"),
                    supervise.Child("celery", "the Celery worker"),
                ],
                on_start=serve_metrics,
                child_exited=metrics_server.child_exited,
            )
        )
    if supervise.role() == SHARD_LOOP:
        from perdura import shard_loops

        shard_loops.run()
        return
    # SIGTERM starts Celery's cold shutdown (not the warm one, which waits for running tasks however
    # long they take): tasks get CELERY_WORKER_SOFT_SHUTDOWN_TIMEOUT to finish, then are cancelled
    # and, being acks_late, redelivered; their rows are untouched. Read by billiard at import.
    os.environ.setdefault("REMAP_SIGTERM", "SIGQUIT")
    from perdura import logs
    from perdura.celery import app

    # --quiet: no start-up banner on stdout, where in the JSON format every line must be a log line.
    quiet = ["--quiet"] if logs.is_json() else []
    # No mingle and no gossip: they share revoked task ids, clocks and worker events among Celery workers,
    # none of which Perdura uses (shards are owned through their leases in the database), and mingle's
    # wait for neighbours held up every worker's start by a second.
    alone = ["--without-mingle", "--without-gossip"]
    app.worker_main(
        [*quiet, "worker", *alone, "--loglevel", args.loglevel, "-c", str(args.concurrency), *args.extra]
    )


SHARD_LOOP = "shards"


def _cmd_beat(args: argparse.Namespace) -> None:
    from perdura import env
    from perdura.celery import app

    schedule = args.schedule or str(env.data_dir() / "celerybeat-schedule")
    env.data_dir().mkdir(parents=True, exist_ok=True)
    from perdura import logs

    quiet = ["--quiet"] if logs.is_json() else []  # no banner (see _cmd_worker)
    app.start([*quiet, "beat", "--loglevel", args.loglevel, "--schedule", schedule])


def _cmd_masterkey(args: argparse.Namespace) -> None:
    from perdura import masterkey

    print(masterkey.generate())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="perdura", description="Perdura: a Temporal-compatible durable execution server"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    dev = sub.add_parser(
        "dev", help="run everything in one process on SQLite (like `temporal server start-dev`)"
    )
    dev.add_argument("--ip", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=7233, help="gRPC port (default 7233)")
    dev.add_argument("--ui-port", type=int, default=8233, help="web port (default 8233; 0 turns it off)")
    where = dev.add_mutually_exclusive_group()
    where.add_argument("--db-file", help="SQLite file to keep state in (default: .perdura/perdura.sqlite3)")
    where.add_argument(
        "--ephemeral", action="store_true", help="keep nothing: a temporary database, removed at exit"
    )
    dev.add_argument(
        "--require-auth",
        action="store_true",
        help="refuse calls without an API key, even from loopback (as `perdura api` does)",
    )
    _tls_flags(dev)
    from perdura import metrics_server

    # Off by default, as `temporal server start-dev`'s: several dev servers on one machine are common.
    metrics_server.add_flag(dev, default=0, what="the dev server")
    dev.set_defaults(func=_cmd_dev)

    sub.add_parser("migrate", help="create or upgrade the database schema").set_defaults(func=_cmd_migrate)

    api = sub.add_parser("api", help="serve the gRPC API (stateless; run several)")
    api.add_argument("--ip", default="0.0.0.0")
    api.add_argument("--port", type=int, default=7233)
    api.add_argument("--db-threads", type=_at_least_one, default=16, help="database threads (default 16)")
    api.add_argument(
        "--processes",
        type=int,
        default=1,
        help="API processes sharing the port, e.g. one per core (default 1)",
    )
    _tls_flags(api)
    metrics_server.add_flag(api, default=metrics_server.DEFAULT_PORT, what="the API processes")
    api.set_defaults(func=_cmd_api)

    web = sub.add_parser(
        "web",
        help="serve the web app: console, REST API, accounts (ASGI under uvicorn; stateless, run several)",
    )
    web.add_argument("--ip", default="0.0.0.0")
    web.add_argument("--port", type=int, default=8233)
    web.add_argument("--workers", type=int, default=2)
    web.add_argument("extra", nargs="*", help="more uvicorn options, after --")
    web.set_defaults(func=_cmd_web)

    worker = sub.add_parser("worker", help="run a Celery shard worker (timers, sweeps)")
    worker.add_argument("--loglevel", default="INFO")
    worker.add_argument("--concurrency", type=int, default=2)
    metrics_server.add_flag(worker, default=metrics_server.DEFAULT_PORT, what="the worker and its pool")
    worker.add_argument("extra", nargs="*")
    worker.set_defaults(func=_cmd_worker)

    beat = sub.add_parser("beat", help="run Celery beat (the periodic sweeps)")
    beat.add_argument("--loglevel", default="INFO")
    beat.add_argument("--schedule", help="beat's schedule file (default: under PERDURA_DATA_DIR)")
    beat.set_defaults(func=_cmd_beat)

    masterkey = sub.add_parser("masterkey", help="print a new random master key; `rotate` re-wraps data keys")
    masterkey.set_defaults(func=_cmd_masterkey)
    from perdura import keys_cli

    keys_cli.add_masterkey_parsers(masterkey)

    from perdura import control

    control.add_parsers(sub)

    from perdura import visibility_cli

    visibility_cli.add_parsers(sub)

    from perdura import export_cli

    export_cli.add_parsers(sub)

    from perdura import shards_cli

    shards_cli.add_parsers(sub)

    from perdura import inventory_cli

    inventory_cli.add_parsers(sub)

    from perdura import erase_cli

    erase_cli.add_parsers(sub)

    args = parser.parse_args(argv)
    # Each process's Postgres sessions carry its role (pg_stat_activity.application_name): an operator can
    # tell the api's connections from the workers', and a test can follow a worker's.
    os.environ.setdefault("PGAPPNAME", f"perdura-{args.command}")
    try:
        args.func(args)
    except Exception as e:
        # A setting missing or wrong (say, no PERDURA_MASTER_KEY): the message says what to do; a traceback
        # would bury it. (Only a command that set Django up can raise it; `export verify` runs without.)
        if "django" in sys.modules:
            from django.core.exceptions import ImproperlyConfigured

            if isinstance(e, ImproperlyConfigured):
                raise SystemExit(f"perdura {args.command}: {e}") from None
        raise


if __name__ == "__main__":
    main(sys.argv[1:])
