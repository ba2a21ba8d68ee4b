"""What the browser sends a namespace's codec server: the payloads the console cannot read itself.

A client's PayloadCodec (encryption, compression) turns payloads into encodings only it knows; the
server keeps them so and never sees the key. The page carries each such payload in its wire form
(the protobuf JSON of `temporal.api.common.v1.Payload`, as the codec protocol takes it) and
static/frontend/codec.js posts them to `{codec}/decode` from the browser, as the Temporal UI does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload, Payloads

from frontend.payloads import decode

_ORIGIN = re.compile(r"https?://[A-Za-z0-9.\-]+(:[0-9]{1,5})?|https?://\[[0-9A-Fa-f:]+\](:[0-9]{1,5})?")


@dataclass(frozen=True, slots=True)
class Encoded:
    """A payload the console could not decode, where it sits in its message, and its wire form."""

    path: str
    """Where the payload sits, as JSON field names (`signalInput`, `failure.applicationFailureInfo.details[0]`)."""
    encoding: str
    text: str
    """Its bytes as base64: what the page shows until the codec server answers."""
    wire: str
    """The payload as protobuf JSON, for the codec server's /decode."""


def encoded_payloads(message: Message, path: str = "") -> list[Encoded]:
    """Every payload inside `message` (at any depth) whose encoding the console does not read.

    Payloads the default converter wrote (JSON, null) are shown decoded already and are never sent to
    the codec server: it would only pass them through, and it need not see more than it must.
    """
    found: list[Encoded] = []
    if isinstance(message, Payload):
        shown = decode(message)
        if shown.kind == "base64":
            found.append(Encoded(path=path, encoding=shown.encoding, text=shown.text, wire=shown.wire))
        return found
    if isinstance(message, Payloads):
        for i, p in enumerate(message.payloads):
            found.extend(encoded_payloads(p, f"{path}[{i}]"))
        return found
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        where = f"{path}.{field.json_name}" if path else field.json_name
        if field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.message_type is not None:
                for key, item in value.items():
                    found.extend(encoded_payloads(item, f"{where}.{key}"))
        elif field.is_repeated:
            for i, item in enumerate(value):
                found.extend(encoded_payloads(item, f"{where}[{i}]"))
        else:
            found.extend(encoded_payloads(value, where))
    return found


def connect_origin(url: str) -> str:
    """The origin the page's CSP must allow in connect-src for a codec server URL ('' for none)."""
    if not url:
        return ""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    # It goes into a header: anything that could end the directive or add a source is refused.
    return origin if _ORIGIN.fullmatch(origin) else ""
