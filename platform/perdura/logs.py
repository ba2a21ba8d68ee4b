"""The log format of every process: text (the default) or, with PERDURA_LOG_FORMAT=json, one JSON object a
line, for log pipelines that parse rather than grep.

A JSON line has `time` (RFC 3339, UTC), `level`, `logger` and `message`, the gRPC call's `namespace`,
`method`, `request_id` and `trace_id` (perdura/logcontext.py; empty outside a call), `code` when the line
reports a gRPC status, and `exception` with the traceback when there is one. Messages are written so as
never to hold payloads or secrets; the formatter adds only identifiers.

Django (`perdura api`, `migrate` and the operator commands) reads `logging_config()` as its LOGGING; uvicorn
(`perdura web`, the web port of `perdura dev`) and Celery (`perdura worker`, `perdura beat`) configure
logging themselves, so they are handed the same configuration (`uvicorn_config()`, `configure()`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import logging.config
import os
import tempfile
from typing import Any

from perdura import logcontext

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_format() -> str:
    value = os.environ.get("PERDURA_LOG_FORMAT", "text").strip().lower() or "text"
    if value not in FORMATS:
        raise SystemExit(f"PERDURA_LOG_FORMAT must be one of {', '.join(FORMATS)}, not {value!r}")
    return value


def is_json() -> bool:
    return log_format() == "json"


def level() -> str:
    return os.environ.get("PERDURA_LOG_LEVEL", "INFO").upper()


class JsonFormatter(logging.Formatter):
    """One JSON object a line (see the module's docstring for its fields)."""

    def format(self, record: logging.LogRecord) -> str:
        call = logcontext.current()
        doc: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, tz=dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "namespace": call.namespace if call else "",
            "method": call.method if call else "",
            "request_id": call.request_id if call else "",
            "trace_id": call.trace_id if call else "",
        }
        code = getattr(record, "code", None)
        if code:
            doc["code"] = str(code)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            doc["exception"] = record.exc_text
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        return json.dumps(doc, ensure_ascii=False, default=str)


def _formatter() -> dict[str, Any]:
    if is_json():
        return {"()": "perdura.logs.JsonFormatter"}
    return {"format": TEXT_FORMAT}


def logging_config(log_level: int | str | None = None) -> dict[str, Any]:
    """A logging.config.dictConfig for this process: everything through one handler on stderr."""
    if log_level is None:
        log_level = level()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"perdura": _formatter()},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "perdura"}},
        "root": {
            "handlers": ["console"],
            "level": log_level.upper() if isinstance(log_level, str) else log_level,
        },
    }


def uvicorn_config(log_level: int | str | None = None) -> dict[str, Any]:
    """The same for uvicorn, whose own loggers otherwise keep handlers (and a format) of their own: they
    pass their lines to the root handler instead."""
    config = logging_config(log_level)
    config["loggers"] = {
        name: {"handlers": [], "propagate": True} for name in ("uvicorn", "uvicorn.error", "uvicorn.access")
    }
    return config


def uvicorn_config_file() -> str:
    """`uvicorn_config()` in a file, for the uvicorn command line (`perdura web`), which takes no other
    form; each of its worker processes reads it at start."""
    with tempfile.NamedTemporaryFile("w", prefix="perdura-web-logging-", suffix=".json", delete=False) as f:
        json.dump(uvicorn_config(), f)
    return f.name


def configure(log_level: int | str | None = None) -> None:
    """Apply the configuration now (Celery's processes, which set up logging before Django does), and let
    Python's warnings through it rather than straight to stderr."""
    logging.config.dictConfig(logging_config(log_level))
    logging.captureWarnings(True)


def announce(logger: logging.Logger, message: str) -> None:
    """A line for the person at the terminal (a server's address, that it stops): printed as it is in the
    text format, logged through `logger` in the JSON one, where every line must parse."""
    if is_json():
        logger.info(message)
    else:
        print(message, flush=True)  # noqa: T201  (a terminal line, by design)
