"""Payloads made readable: JSON pretty-printed, anything else as base64, by the `encoding` metadata.

Only the SDKs' default converter encodings are decoded here; payloads a client encoded itself (e.g.
`binary/encrypted`) are shown as base64 and carry their wire form, which the namespace's codec server
decodes in the browser (frontend/codec.py, static/frontend/codec.js).
The text produced is plain text: templates escape it like any other tenant data.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload, Payloads

_JSON_ENCODINGS = frozenset({"json/plain", "json/protobuf"})
ERASED_ENCODING = "binary/x-perdura-erased"
"""A payload whose data subject's key was destroyed (engine/persistence/subject_seal.py): shown as erased."""


@dataclass(frozen=True, slots=True)
class Decoded:
    """One payload as text, and how it was turned into text."""

    encoding: str
    """The payload's `encoding` metadata ('' when absent)."""
    kind: str
    """`json` (pretty-printed), `null`, `erased` (its data subject was erased), or `base64` (binary, or
    JSON that did not parse)."""
    text: str
    wire: str = ""
    """For `base64`: the payload as the codec protocol's JSON, which the browser sends the codec server."""


def wire(payload: Payload) -> str:
    """The payload as the codec protocol's JSON: protobuf JSON, metadata values and data in base64."""
    return json.dumps(MessageToDict(payload), separators=(",", ":"))


def decode(payload: Payload) -> Decoded:
    encoding = payload.metadata.get("encoding", b"").decode("utf-8", "replace")
    if encoding == "binary/null":
        return Decoded(encoding=encoding, kind="null", text="null")
    if encoding == ERASED_ENCODING:
        return Decoded(encoding=encoding, kind="erased", text="erased")
    if encoding in _JSON_ENCODINGS:
        try:
            value = json.loads(payload.data)
        except (UnicodeDecodeError, ValueError):
            pass
        else:
            return Decoded(
                encoding=encoding, kind="json", text=json.dumps(value, indent=2, ensure_ascii=False)
            )
    return Decoded(
        encoding=encoding, kind="base64", text=base64.b64encode(payload.data).decode(), wire=wire(payload)
    )


def decode_all(payloads: Payloads | None) -> list[Decoded]:
    return [decode(p) for p in payloads.payloads] if payloads is not None else []


def to_plain(value: object) -> object:
    """A JSON-ready copy of a protobuf message's dict form with every Payload decoded in place.

    MessageToDict renders a Payload as {"metadata": {...base64}, "data": base64}; the console shows the
    decoded value instead, keeping the encoding beside it, so an event's raw JSON is readable.
    """
    if isinstance(value, dict):
        if set(value) <= {"metadata", "data", "externalPayloads"} and "metadata" in value:
            return _plain_payload(value)
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    return value


def _plain_payload(value: dict) -> object:
    payload = Payload()
    for key, raw in value.get("metadata", {}).items():
        payload.metadata[key] = base64.b64decode(raw)
    payload.data = base64.b64decode(value.get("data", ""))
    decoded = decode(payload)
    if decoded.kind == "json":
        return json.loads(decoded.text)
    if decoded.kind == "null":
        return None
    if decoded.kind == "erased":
        return {"encoding": decoded.encoding, "erased": True}
    return {"encoding": decoded.encoding, "base64": decoded.text}


def message_json(message: Message) -> dict:
    """A protobuf message as the console's JSON: camelCase names as Temporal's JSON, payloads decoded."""
    plain = to_plain(MessageToDict(message))
    return plain if isinstance(plain, dict) else {}
