"""A codec server for the web console: the browser posts a run's encrypted payloads here and shows what
comes back, so people read payloads the Perdura server itself cannot (the Temporal UI's protocol:
POST /decode with `{"payloads": [...]}` in protobuf JSON, header X-Namespace).

    CODEC_KEY=... python examples/encryption/codec_server.py --port 8081 --origin https://console.example.com

then set the namespace's codec server URL to this server's address (settings page, or
`perdura namespace update NAME --codec-server-url https://codec.example.com`). Only the console's origin
(--origin, repeatable) may call it from a browser; run it where the people who may read the payloads can
reach it and nobody else can (behind your VPN or sign-in proxy), and over https outside localhost.
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

sys.path.insert(0, str(Path(__file__).resolve().parent))
from codec import EncryptionCodec  # noqa: E402  (run as a script, beside codec.py)

MAX_BODY = 8 * 1024 * 1024


def handler_for(codec: EncryptionCodec, origins: frozenset[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _cors(self) -> None:
            """CORS headers for an allowed console origin; none for others (the browser then refuses)."""
            origin = self.headers.get("Origin")
            if origin not in origins:
                return
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
            self.send_header("Access-Control-Allow-Headers", "Content-Type, X-Namespace")
            self.send_header("Vary", "Origin")

        def _answer(self, status: int, body: dict[str, object]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self._cors()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_OPTIONS(self) -> None:
            self.send_response(204 if self.headers.get("Origin") in origins else 403)
            self._cors()
            self.end_headers()

        def do_POST(self) -> None:
            if self.headers.get("Origin") not in (None, *origins):
                self._answer(403, {"message": "this origin may not use the codec server"})
                return
            if self.path.rstrip("/").rsplit("/", 1)[-1] != "decode":
                self._answer(404, {"message": "only /decode is served"})
                return
            length = int(self.headers.get("Content-Length", "0"))
            if length > MAX_BODY:
                self._answer(413, {"message": f"at most {MAX_BODY} bytes a request"})
                return
            try:
                payloads = json_format.Parse(self.rfile.read(length), Payloads())
                decoded = Payloads(payloads=[codec.open(p) for p in payloads.payloads])
            except Exception as e:  # a bad body or a payload that does not open: the caller's to fix
                self._answer(400, {"message": f"cannot decode: {type(e).__name__}: {e}"})
                return
            self._answer(200, json_format.MessageToDict(decoded))

        def log_message(self, format: str, *args: object) -> None:
            pass  # payloads pass through here: log nothing about requests

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ip", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument(
        "--origin", action="append", required=True, help="the console's origin, e.g. http://127.0.0.1:8233"
    )
    args = parser.parse_args()
    server = ThreadingHTTPServer(
        (args.ip, args.port), handler_for(EncryptionCodec.from_env(), frozenset(args.origin))
    )
    sys.stdout.write(f"codec server on http://{args.ip}:{server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
