"""The run export's manifest and verifier (engine/exports/manifest.py), on small documents: what is hashed,
what reformatting leaves alone, and how each kind of tampering is named."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engine.exports import manifest

SUBJECT = {"namespace": "ns", "workflow_id": "wf", "run_id": "r1"}
KEY = Ed25519PrivateKey.generate()


def _document() -> dict:
    doc = {
        "events": [
            {"eventId": str(i), "eventType": f"EVENT_TYPE_T{i}", "eventTime": "2026-01-01T00:00:00Z"}
            for i in range(1, 7)
        ],
        "format": manifest.FORMAT,
        "run": {"workflow_id": "wf", "memo": {"fields": {"note": {"data": "w6lsw6h2ZQ=="}}}, "who": "Zoë"},
        "links": {"parent": None, "children": []},
        "audit": [{"id": 10 + i, "action": f"A{i}"} for i in range(3)],
    }
    doc["manifest"] = manifest.sign(subject=SUBJECT, document=doc, key=KEY, created_at="2026-01-01T00:00:00Z")
    return doc


def _message(doc: dict) -> str:
    verdict = manifest.verify(json.loads(json.dumps(doc)), public_key=KEY.public_key())
    assert not verdict.ok
    return verdict.message


def test_an_untouched_document_verifies_whatever_its_formatting():
    doc = _document()
    for text in (
        json.dumps(doc),
        json.dumps(doc, indent=4, ensure_ascii=True),
        json.dumps(doc, sort_keys=True),
    ):
        verdict = manifest.verify(json.loads(text), public_key=KEY.public_key())
        assert verdict.ok, verdict.message
        assert verdict.trusted_key
        assert "6 events and 3 audit entries" in verdict.message


def test_the_head_is_the_chain_over_the_item_hashes_in_order():
    doc = _document()
    signed = doc["manifest"]
    hashes = [e["sha256"] for e in signed["items"]]
    assert [e["kind"] for e in signed["items"]] == ["run", "links"] + ["event"] * 6 + ["audit"] * 3
    assert hashes[2] == manifest.item_hash("event", doc["events"][0])
    assert signed["head"] == manifest.chain_head(SUBJECT, hashes)
    assert signed["head"] != manifest.chain_head(SUBJECT, [hashes[1], hashes[0], *hashes[2:]])


@pytest.mark.parametrize(
    ("tamper", "expected"),
    [
        (lambda d: d["events"][2].update(eventTime="2026-01-01T00:00:01Z"), "event 3 (T3) was changed"),
        (
            lambda d: d["events"].__setitem__(slice(3, 5), [d["events"][4], d["events"][3]]),
            "event 4 (T4) was reordered",
        ),
        (lambda d: d["events"].pop(1), "event 2 (T2) was removed"),
        (lambda d: d["events"].pop(), "event 6 (T6) was removed"),
        (
            lambda d: d["events"].insert(2, {"eventId": "99", "eventType": "EVENT_TYPE_X"}),
            "event 99 (X) was inserted",
        ),
        (lambda d: d["audit"].pop(0), "audit entry 10 (A0) was removed"),
        (lambda d: d["audit"].append({"id": 50, "action": "Forged"}), "audit entry 50 (Forged) was inserted"),
        (lambda d: d["run"].update(who="Zoe"), "the run section was changed"),
        (lambda d: d["links"].update(parent={"workflow_id": "x"}), "the links section was changed"),
        (lambda d: d["events"][0].pop("eventTime"), "event 1 (T1) was changed"),
        # Same bodies in the same chain order, but an audit entry passed off as an event: the kind is hashed.
        (lambda d: d["events"].append(d["audit"].pop(0)), "audit entry 10 (A0) was changed"),
    ],
)
def test_each_tampering_is_named_at_its_first_place(tamper, expected):
    doc = _document()
    tamper(doc)
    assert _message(doc).startswith(expected)


def test_a_resigned_document_fails_against_the_published_key_and_an_altered_manifest_fails_everywhere():
    doc = _document()
    doc["events"][0]["eventType"] = "EVENT_TYPE_FORGED"
    del doc["manifest"]
    doc["manifest"] = manifest.sign(
        subject=SUBJECT, document=doc, key=Ed25519PrivateKey.generate(), created_at="x"
    )
    assert "signature does not hold" in _message(doc)
    assert manifest.verify(doc).ok  # self-consistent under its own key: hence --public-key
    assert not manifest.verify(doc).trusted_key

    honest = _document()
    honest["manifest"]["items"][3]["sha256"] = "0" * 64
    assert "signature does not hold" in _message(honest)
    assert "signature does not hold" in manifest.verify(honest).message


def test_not_an_export():
    assert not manifest.verify({"events": []}).ok
    assert not manifest.verify([]).ok
    doc = _document()
    del doc["audit"]
    assert "no `audit` list" in _message(doc)


def test_unsigned_sections_and_another_format_are_refused():
    doc = _document()
    doc["notes"] = {"approved_by": "nobody"}
    assert _message(doc) == "the file holds unsigned sections: notes"
    doc = _document()
    doc["format"] = "perdura.run-export/0"
    assert "unknown export format" in _message(doc)
