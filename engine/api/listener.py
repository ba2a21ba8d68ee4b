"""Postgres LISTEN relay: wake-ups committed by other processes reach this process's long-polls."""

from __future__ import annotations

import logging
import threading
import time

import psycopg
from django.db import connection

from engine import notify

log = logging.getLogger("perdura.api")


def _dsn() -> str:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params.pop("prepare_threshold", None)
    return psycopg.conninfo.make_conninfo(
        **{k: v for k, v in params.items() if v is not None and k != "options"}
    )


def _listen_forever(channel: str) -> None:
    while True:
        try:
            with psycopg.connect(_dsn(), autocommit=True) as conn:
                conn.execute(f"LISTEN {channel}")
                for message in conn.notifies():
                    keys = notify.parse_payload(message.payload)
                    if keys is not None:
                        notify.hub.publish(keys)
        except Exception:
            log.exception(
                "wake-up listener lost its connection; reconnecting (long-polls fall back to re-checks)"
            )
            time.sleep(1.0)


def start_listener(channel: str = notify.CHANNEL) -> None:
    """Relay the NOTIFYs of `channel` into the hub from a daemon thread (Postgres only; SQLite runs in one
    process): the API's wake-ups, or the shard loops' (notify.SHARD_CHANNEL)."""
    if connection.vendor != "postgresql":
        return
    threading.Thread(target=_listen_forever, args=(channel,), name="perdura-listen", daemon=True).start()
