"""The history archive's object (engine/archival/layout.py): its name, its framing, its header."""

from __future__ import annotations

import hashlib
import zlib

import pytest

from engine.archival import layout


def test_an_objects_name_hashes_the_workflow_id_under_the_namespace():
    name = layout.object_name("ns-id", "order/42 with spaces" * 60, "run-1")
    digest = hashlib.sha256(("order/42 with spaces" * 60).encode()).hexdigest()[:32]
    assert name == f"ns-id/history/{digest}/run-1.history"


def test_batches_pack_compressed_and_unpack_in_order():
    batches = [layout.Batch(1, 3, b"first" * 100), layout.Batch(4, 4, b""), layout.Batch(5, 9, b"\xffsealed")]
    body = layout.pack(batches)
    assert len(body) < sum(len(b.data) for b in batches)
    assert list(layout.unpack(body)) == batches


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"not zlib", "does not decompress"),
        (zlib.compress(b"\x00" * 10), "inside a batch header"),
        (zlib.compress(b"\x00" * 8 + b"\x00" * 7 + b"\x01" + b"\x00\x00\x00\x09abc"), "inside a batch"),
    ],
)
def test_a_body_that_is_not_framed_batches_is_refused(body, why):
    with pytest.raises(layout.ArchiveFormatError, match=why):
        list(layout.unpack(body))


def test_the_header_line_is_read_back_and_binds_the_body():
    header = layout.header_bytes({"run_id": "r", "events": 3})
    data = layout.assemble(header, b"sealed\nbytes")
    parsed, line, sealed = layout.split(data)
    assert parsed == {"format": layout.FORMAT, "run_id": "r", "events": 3}
    assert (line, sealed) == (header, b"sealed\nbytes")
    assert layout.aad("ns", "r", line) == b"perdura/archive/history/ns/r/" + header
    assert layout.checksum(data) == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"PK\x03\x04zip", "unknown leading bytes"),
        (layout.MAGIC + b'{"format":"perdura-history/1"}', "does not end"),
        (layout.MAGIC + b"not json\n", "not JSON"),
        (layout.MAGIC + b'{"format":"perdura-history/9"}\nx', "unknown archive format"),
    ],
)
def test_what_is_not_an_archive_of_a_known_format_is_refused(data, why):
    with pytest.raises(layout.ArchiveFormatError, match=why):
        layout.split(data)
