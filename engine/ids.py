"""Identifiers: run ids and the shard a run belongs to."""

from __future__ import annotations

import os
import time
import uuid
import zlib


def new_run_id() -> str:
    """A UUIDv7 (time-ordered), as Temporal's run ids are: 48 bits of milliseconds, then random bits."""
    millis = time.time_ns() // 1_000_000
    value = (millis & ((1 << 48) - 1)) << 80 | int.from_bytes(os.urandom(10), "big")
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return str(uuid.UUID(int=value))


def shard_for(namespace_id: uuid.UUID | str, workflow_id: str, shards: int) -> int:
    """The shard of a workflow id: stable for the life of an installation (N is fixed at install)."""
    return zlib.crc32(f"{namespace_id}/{workflow_id}".encode()) % shards


class SystemIds:
    """The ids the history rules are given in production (engine.history.sources.IdSource)."""

    def run_id(self) -> str:
        return new_run_id()

    def request_id(self) -> str:
        return str(uuid.uuid4())


SYSTEM = SystemIds()
