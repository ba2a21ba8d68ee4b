"""The manifest of a run export: a SHA-256 hash chain over its items, signed with Ed25519; and its verifier.

Pure: standard library and `cryptography` only (no Django, no database, no protobuf), so that
`perdura export verify` runs anywhere the package is installed.

What is hashed. The items of an export, in this order: its `run` section, its `links` section, every
event of `events` (the History), every entry of `audit`. Each item's hash is

    item_sha256 = SHA-256(canonical({"kind": KIND, "body": ITEM}))

with KIND one of `run`, `links`, `event`, `audit`, and `canonical(x)` the UTF-8 bytes of
`json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`: the JSON value as it sits
in the file, whatever whitespace a tool later gives it. The chain starts from the subject (namespace,
workflow id, run id) and takes each item in turn:

    chain_0 = SHA-256(canonical(subject));  chain_i = SHA-256(chain_{i-1} || item_sha256_i)

The manifest lists every item (kind, id, type or action, item hash) and the final chain value
(`head`); the Ed25519 signature covers the canonical manifest without its `signature` field. So a
verifier trusts the list once the signature holds, and can then name the first item of the file that
differs from it: changed, removed, reordered or inserted.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

FORMAT = "perdura.run-export/1"
MANIFEST_FORMAT = "perdura.run-export.manifest/1"
RUN, LINKS, EVENT, AUDIT = "run", "links", "event", "audit"
SECTIONS = frozenset({"events", "format", "run", "links", "audit", "manifest"})
"""The top-level fields of an export: the hashed items' sections, `format` (fixed) and the manifest."""


def canonical(value: Any) -> bytes:
    """The bytes that are hashed for a JSON value: sorted keys, no whitespace, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def item_hash(kind: str, body: Any) -> str:
    return hashlib.sha256(canonical({"kind": kind, "body": body})).hexdigest()


def chain_head(subject: dict[str, Any], hashes: list[str]) -> str:
    value = hashlib.sha256(canonical(subject)).digest()
    for h in hashes:
        value = hashlib.sha256(value + bytes.fromhex(h)).digest()
    return value.hex()


def public_pem(key: Ed25519PublicKey) -> str:
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


def fingerprint(key: Ed25519PublicKey) -> str:
    """`sha256:<hex>` of the raw public key: how people compare a file's key with a published one."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def _event_label(event: Any) -> tuple[Any, str]:
    if not isinstance(event, dict):
        return None, ""
    event_id: Any = event.get("eventId")
    try:
        event_id = int(event_id)
    except (TypeError, ValueError):
        pass
    return event_id, str(event.get("eventType", "")).removeprefix("EVENT_TYPE_")


def _items(document: dict[str, Any]) -> list[tuple[str, Any, Any, str]]:
    """(kind, body, id, what) of every hashed item of `document`, in chain order.

    Raises:
        ValueError: the document does not have the shape of an export.
    """
    events = document.get("events")
    audit = document.get("audit")
    if not isinstance(events, list):
        raise ValueError("it has no `events` list")
    if not isinstance(audit, list):
        raise ValueError("it has no `audit` list")
    items: list[tuple[str, Any, Any, str]] = [
        (RUN, document.get("run"), None, ""),
        (LINKS, document.get("links"), None, ""),
    ]
    for event in events:
        event_id, what = _event_label(event)
        items.append((EVENT, event, event_id, what))
    for entry in audit:
        entry_id = entry.get("id") if isinstance(entry, dict) else None
        what = str(entry.get("action", "")) if isinstance(entry, dict) else ""
        items.append((AUDIT, entry, entry_id, what))
    return items


def sign(
    *, subject: dict[str, Any], document: dict[str, Any], key: Ed25519PrivateKey, created_at: str
) -> dict[str, Any]:
    """The signed manifest of `document` (which holds `run`, `links`, `events` and `audit`)."""
    entries = []
    hashes = []
    for kind, body, item_id, what in _items(document):
        h = item_hash(kind, body)
        hashes.append(h)
        entry: dict[str, Any] = {"kind": kind, "sha256": h}
        if item_id is not None:
            entry["id"] = item_id
        if what:
            entry["what"] = what
        entries.append(entry)
    public = key.public_key()
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "subject": subject,
        "created_at": created_at,
        "canonicalization": "json-sorted-keys-compact-utf8",
        "hash": "sha256-chain",
        "items": entries,
        "head": chain_head(subject, hashes),
        "key": {"algorithm": "Ed25519", "public_key": public_pem(public), "fingerprint": fingerprint(public)},
    }
    manifest["signature"] = base64.b64encode(key.sign(canonical(manifest))).decode()
    return manifest


# --- verification -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Verdict:
    """What `verify` found."""

    ok: bool
    message: str
    fingerprint: str = ""
    """The fingerprint of the key the signature was checked with."""
    trusted_key: bool = False
    """True when that key was given by the caller (the installation's published key), not taken from the file."""
    place: str = ""
    """The first item that differs, as people name it (`event 7 (ActivityTaskCompleted)`), if any."""


def _label(kind: str, item_id: Any, what: str) -> str:
    if kind == RUN:
        return "the run section"
    if kind == LINKS:
        return "the links section"
    name = "event" if kind == EVENT else "audit entry"
    label = f"{name} {item_id}" if item_id is not None else name
    return f"{label} ({what})" if what else label


def _entry_label(entry: Any) -> str:
    if not isinstance(entry, dict):
        return "an item"
    return _label(str(entry.get("kind", "")), entry.get("id"), str(entry.get("what", "")))


def _first_difference(signed: list[dict[str, Any]], found: list[tuple[str, Any, Any, str]]) -> str | None:
    """How the file's items differ from the signed list at the first place they do (None: they agree)."""
    signed_hashes = [str(e.get("sha256", "")) if isinstance(e, dict) else "" for e in signed]
    found_hashes = [item_hash(kind, body) for kind, body, _, _ in found]
    index = next(
        (i for i, (a, b) in enumerate(zip(signed_hashes, found_hashes, strict=False)) if a != b),
        min(len(signed_hashes), len(found_hashes)),
    )
    if index == len(signed_hashes) == len(found_hashes):
        return None
    position = f"at position {index + 1} of {len(signed_hashes)} signed items"
    if index >= len(found_hashes):
        return f"{_entry_label(signed[index])} was removed (missing {position})"
    found_label = _label(found[index][0], found[index][2], found[index][3])
    if index >= len(signed_hashes):
        return f"{found_label} was inserted (after the last of {len(signed_hashes)} signed items)"
    expected = signed_hashes[index]
    later_found = set(found_hashes[index + 1 :])
    later_signed = set(signed_hashes[index + 1 :])
    here = found_hashes[index]
    if here in later_signed:
        if expected in later_found:
            return f"{_entry_label(signed[index])} was reordered (it is no longer {position})"
        return f"{_entry_label(signed[index])} was removed ({position})"
    if expected in later_found:
        return f"{found_label} was inserted ({position}, before {_entry_label(signed[index])})"
    return f"{_entry_label(signed[index])} was changed ({position})"


def load_public_key(pem: bytes | str) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM.

    Raises:
        ValueError: not a PEM Ed25519 public key.
    """
    data = pem.encode() if isinstance(pem, str) else pem
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as e:
        raise ValueError(f"not a PEM public key: {e}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("not an Ed25519 public key")
    return key


def verify(document: Any, *, public_key: Ed25519PublicKey | None = None) -> Verdict:
    """Check an export: its manifest's signature (with `public_key`, else the key the file names), the
    chain of the signed list, and that the file's items are exactly the signed ones in the signed order."""
    if not isinstance(document, dict) or not isinstance(document.get("manifest"), dict):
        return Verdict(ok=False, message="not a Perdura run export: no manifest")
    manifest = document["manifest"]
    if manifest.get("format") != MANIFEST_FORMAT:
        return Verdict(ok=False, message=f"unknown manifest format {manifest.get('format')!r}")
    trusted = public_key is not None
    if public_key is None:
        try:
            public_key = load_public_key(str((manifest.get("key") or {}).get("public_key", "")))
        except ValueError as e:
            return Verdict(ok=False, message=f"the manifest's key is unreadable: {e}")
    fp = fingerprint(public_key)
    unsigned = {k: v for k, v in manifest.items() if k != "signature"}
    try:
        signature = base64.b64decode(str(manifest.get("signature", "")), validate=True)
        public_key.verify(signature, canonical(unsigned))
    except (InvalidSignature, ValueError):
        named = str((manifest.get("key") or {}).get("fingerprint", ""))
        why = f" (the file names key {named})" if trusted and named != fp else ""
        return Verdict(
            ok=False,
            message=f"the manifest's signature does not hold under key {fp}{why}: "
            "the manifest was altered or signed with another key",
            fingerprint=fp,
            trusted_key=trusted,
        )
    signed = manifest.get("items")
    subject = manifest.get("subject")
    if not isinstance(signed, list) or not isinstance(subject, dict):
        return Verdict(ok=False, message="the manifest has no item list or subject", fingerprint=fp)
    try:
        chain = chain_head(subject, [str(e.get("sha256", "")) for e in signed])
    except (ValueError, AttributeError):
        chain = ""
    if chain != manifest.get("head"):
        return Verdict(ok=False, message="the manifest's hash chain does not reach its head", fingerprint=fp)
    unsigned_sections = sorted(set(document) - SECTIONS)
    if unsigned_sections:
        # Nothing in the file may pass for part of the export without being signed.
        return Verdict(
            ok=False,
            message=f"the file holds unsigned sections: {', '.join(unsigned_sections)}",
            fingerprint=fp,
        )
    if document.get("format") != FORMAT:
        return Verdict(ok=False, message=f"unknown export format {document.get('format')!r}", fingerprint=fp)
    try:
        found = _items(document)
    except ValueError as e:
        return Verdict(ok=False, message=f"not a Perdura run export: {e}", fingerprint=fp)
    difference = _first_difference(signed, found)
    if difference is not None:
        return Verdict(ok=False, message=difference, fingerprint=fp, trusted_key=trusted, place=difference)
    events = sum(1 for e in signed if e.get("kind") == EVENT)
    entries = sum(1 for e in signed if e.get("kind") == AUDIT)
    run = f"{subject.get('namespace')}/{subject.get('workflow_id')}/{subject.get('run_id')}"
    return Verdict(
        ok=True,
        message=f"verified: {run}, {events} events and {entries} audit entries, signed by {fp}",
        fingerprint=fp,
        trusted_key=trusted,
    )
