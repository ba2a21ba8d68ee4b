"""Typed readers for Perdura's environment variables, with dev-friendly defaults."""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    """Where `perdura dev` keeps its SQLite file and generated master key."""
    return Path(os.environ.get("PERDURA_DATA_DIR", ".perdura")).resolve()


def database_url() -> str:
    """The database: a SQLite file by default (dev), `postgres://...` in production."""
    return os.environ.get("PERDURA_DATABASE_URL") or f"sqlite:///{data_dir() / 'perdura.sqlite3'}"


def redis_url() -> str:
    return os.environ.get("PERDURA_REDIS_URL", "redis://127.0.0.1:6379/0")


def shard_count() -> int:
    value = os.environ.get("PERDURA_SHARDS", "16")
    try:
        count = int(value)
    except ValueError:
        raise SystemExit(f"PERDURA_SHARDS must be a positive integer, not {value!r}") from None
    if count < 1:
        raise SystemExit(f"PERDURA_SHARDS must be a positive integer, not {value!r}")
    return count


def master_key() -> str | None:
    """The base64 master key that wraps namespace data keys; required outside dev."""
    return os.environ.get("PERDURA_MASTER_KEY") or None


def previous_master_key() -> str | None:
    """PERDURA_MASTER_KEY_PREVIOUS: the master key being rotated away from, kept until every data key is
    re-wrapped under PERDURA_MASTER_KEY (`perdura masterkey rotate`)."""
    return os.environ.get("PERDURA_MASTER_KEY_PREVIOUS") or None


def datakey_refresh_seconds() -> float:
    """PERDURA_DATAKEY_REFRESH_SECONDS: how long a process seals with the data key version it last read
    before looking for a newer one (`perdura namespace rotate-key`); default 30."""
    value = os.environ.get("PERDURA_DATAKEY_REFRESH_SECONDS", "").strip() or "30"
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if seconds < 0:
        raise SystemExit(f"PERDURA_DATAKEY_REFRESH_SECONDS must be a number of seconds, not {value!r}")
    return seconds


AUDIT_RETENTION_MIN_DAYS = 30
"""The shortest audit retention allowed; the database refuses to prune younger entries (tenants migration 0006)."""


def audit_retention_days() -> int:
    """PERDURA_AUDIT_RETENTION_DAYS: how many days audit entries are kept (default 400, a year and a
    margin); 0 keeps them forever. Shorter than 30 days is refused: the last month is never pruned."""
    value = os.environ.get("PERDURA_AUDIT_RETENTION_DAYS", "").strip() or "400"
    try:
        days = int(value)
    except ValueError:
        days = -1
    if days != 0 and days < AUDIT_RETENTION_MIN_DAYS:
        raise SystemExit(
            f"PERDURA_AUDIT_RETENTION_DAYS must be a number of days of at least {AUDIT_RETENTION_MIN_DAYS}, "
            f"or 0 to keep the audit log forever, not {value!r}"
        )
    return days


def dev_mode() -> bool:
    """True inside `perdura dev`: loopback clients need no credentials, the master key may be generated."""
    return os.environ.get("PERDURA_DEV") == "1"


def auth_mode() -> str:
    """PERDURA_AUTH: `required` (every call needs an API key) or `loopback` (unauthenticated loopback
    calls act as the operator); `loopback` by default in `perdura dev`, `required` elsewhere."""
    value = os.environ.get("PERDURA_AUTH") or ("loopback" if dev_mode() else "required")
    if value not in {"required", "loopback"}:
        raise SystemExit(f"PERDURA_AUTH must be 'required' or 'loopback', not {value!r}")
    return value


def flag(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def number(name: str, default: float, *, integer: bool = False) -> float:
    """A positive number from the environment (rates, caps), or `default` when unset."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    try:
        number = int(value) if integer else float(value)
    except ValueError:
        number = 0
    if not number > 0:
        kind = "a positive integer" if integer else "a positive number"
        raise SystemExit(f"{name} must be {kind}, not {value!r}")
    return number
