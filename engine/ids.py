"""Identifiers: run ids and the shard a run belongs to."""

from __future__ import annotations

import uuid
import zlib


def new_run_id() -> str:
    return str(uuid.uuid4())


def shard_for(namespace_id: uuid.UUID | str, workflow_id: str, shards: int) -> int:
    """The shard of a workflow id: stable for the life of an installation (N is fixed at install)."""
    return zlib.crc32(f"{namespace_id}/{workflow_id}".encode()) % shards
