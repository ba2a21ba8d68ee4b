"""The history archive's object: its name in the bucket and its bytes (pure: no Django, no I/O).

One object per run, at `<prefix>/<namespace id>/history/<sha256(workflow id)[:32]>/<run id>.history`
(the workflow id is hashed: it may be 1000 characters of anything, and an S3 key holds 1024 bytes).

    PERDURA-HISTORY-ARCHIVE/1\\n
    <header: one line of JSON>\\n
    <sealed body>

The header is plaintext, as the database's ids, types, times and statuses are (DESIGN.md rule 6): the run,
its event range, the data key version sealing the body, the subject keys the body's sealed payloads need.
The body is the run's history batches as the database stores them inside their namespace-key layer
(payloads of a data subject still sealed under the subject's key), framed and zlib-compressed, then
sealed with AES-256-GCM under the namespace's data key with the header as associated data: a changed
header, or a body moved to another run's object, fails to open.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

MAGIC = b"PERDURA-HISTORY-ARCHIVE/1\n"
FORMAT = "perdura-history/1"
_FRAME = struct.Struct(">QQI")
"""A batch's first and last event ids and its length, before its bytes."""


class ArchiveFormatError(ValueError):
    """The bytes are not a history archive this server can read."""


def object_name(namespace_id: str, workflow_id: str, run_id: str) -> str:
    """The run's object name below the archival URI's prefix."""
    digest = hashlib.sha256(workflow_id.encode()).hexdigest()[:32]
    return f"{namespace_id}/history/{digest}/{run_id}.history"


@dataclass(frozen=True, slots=True)
class Batch:
    """One history batch as stored: its event range and its plaintext under the namespace-key layer."""

    first_event_id: int
    last_event_id: int
    data: bytes


def pack(batches: list[Batch]) -> bytes:
    """The batches framed one after another and compressed: the body before it is sealed."""
    framed = b"".join(_FRAME.pack(b.first_event_id, b.last_event_id, len(b.data)) + b.data for b in batches)
    return zlib.compress(framed, 6)


def unpack(body: bytes) -> Iterator[Batch]:
    """The batches of an opened body, in order.

    Raises:
        ArchiveFormatError: the body is not framed batches.
    """
    try:
        framed = zlib.decompress(body)
    except zlib.error as e:
        raise ArchiveFormatError(f"the archive's body does not decompress: {e}") from None
    at = 0
    while at < len(framed):
        if at + _FRAME.size > len(framed):
            raise ArchiveFormatError("the archive's body ends inside a batch header")
        first, last, size = _FRAME.unpack_from(framed, at)
        at += _FRAME.size
        if at + size > len(framed):
            raise ArchiveFormatError("the archive's body ends inside a batch")
        yield Batch(first_event_id=first, last_event_id=last, data=framed[at : at + size])
        at += size


def header_bytes(header: dict[str, object]) -> bytes:
    """The header line (sorted keys, compact): also the associated data sealing the body."""
    return json.dumps({"format": FORMAT, **header}, sort_keys=True, separators=(",", ":")).encode()


def assemble(header: bytes, sealed: bytes) -> bytes:
    return MAGIC + header + b"\n" + sealed


def split(data: bytes) -> tuple[dict[str, object], bytes, bytes]:
    """(header, header line, sealed body) of an archive object.

    Raises:
        ArchiveFormatError: not a history archive of a known format.
    """
    if not data.startswith(MAGIC):
        raise ArchiveFormatError("not a Perdura history archive (unknown leading bytes)")
    line, newline, sealed = data[len(MAGIC) :].partition(b"\n")
    if not newline:
        raise ArchiveFormatError("the archive's header line does not end")
    try:
        header = json.loads(line)
    except ValueError:
        raise ArchiveFormatError("the archive's header is not JSON") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ArchiveFormatError(
            f"unknown archive format {header.get('format') if isinstance(header, dict) else None!r}"
        )
    return header, line, sealed


def aad(namespace_id: str, run_id: str, header: bytes) -> bytes:
    """The associated data of a sealed body: its namespace and run, and its header line."""
    return f"perdura/archive/history/{namespace_id}/{run_id}/".encode() + header


def checksum(data: bytes) -> str:
    """The object's SHA-256, hex: recorded per run, compared with the object read back."""
    return hashlib.sha256(data).hexdigest()
