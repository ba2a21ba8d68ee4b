"""A client PayloadCodec and a codec server speaking the Temporal UI's protocol, for the console's tests.

The encoding is deliberately simple (the whole Payload, serialized and base64'd, under an encoding of
its own), so a payload the client wrote is unreadable to Perdura and readable to the codec server.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.converter import PayloadCodec

ENCODING = b"binary/x-perdura-test-b64"


def encode_one(payload: Payload) -> Payload:
    return Payload(metadata={"encoding": ENCODING}, data=base64.b64encode(payload.SerializeToString()))


def decode_one(payload: Payload) -> Payload:
    if payload.metadata.get("encoding") != ENCODING:
        return payload  # not ours: passed through, as codec servers do
    return Payload.FromString(base64.b64decode(payload.data))


class Base64Codec(PayloadCodec):
    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [encode_one(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [decode_one(p) for p in payloads]


class CodecServer:
    """A codec server on a loopback port, answering CORS preflights as a browser needs."""

    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []
        """Each /decode request's headers (X-Namespace, Origin) and payload count."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def _cors(self) -> None:
                self.send_header("Access-Control-Allow-Origin", self.headers.get("Origin", "*"))
                self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
                self.send_header("Access-Control-Allow-Headers", "Content-Type, X-Namespace")
                self.send_header("Vary", "Origin")

            def do_OPTIONS(self) -> None:
                self.send_response(204)
                self._cors()
                self.end_headers()

            def do_POST(self) -> None:
                if not self.path.endswith("/decode"):
                    self.send_response(404)
                    self._cors()
                    self.end_headers()
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                payloads = json_format.Parse(body, Payloads())
                server.requests.append(
                    {
                        "namespace": self.headers.get("X-Namespace", ""),
                        "origin": self.headers.get("Origin", ""),
                        "count": str(len(payloads.payloads)),
                    }
                )
                answer = Payloads(payloads=[decode_one(p) for p in payloads.payloads])
                data = json.dumps(json_format.MessageToDict(answer)).encode()
                self.send_response(200)
                self._cors()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @contextmanager
    def running(self) -> Iterator[CodecServer]:
        thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.httpd.shutdown()
            self.httpd.server_close()
            thread.join()
