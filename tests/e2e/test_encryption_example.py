"""The README's client-side encryption setup works as written: examples/encryption/codec.py seals every
payload on the client (the server stores only ciphertext under the codec's encoding), and
examples/encryption/codec_server.py, run as a process, decodes them for the console's origin only."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads
from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.worker import Worker

from examples.encryption.codec import ENCODING, EncryptionCodec
from tests.e2e.workflows import HelloWorkflow, greet
from tests.support import servers

SERVER = Path(__file__).resolve().parents[2] / "examples" / "encryption" / "codec_server.py"
ORIGIN = "http://127.0.0.1:8233"


def _post(url: str, body: bytes, origin: str) -> tuple[int, dict[str, str], dict]:
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "X-Namespace": "default", "Origin": origin},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


async def test_payloads_sealed_by_the_example_codec_are_opaque_to_perdura_and_open_at_its_codec_server(
    dev_server,
):
    key = os.urandom(32)
    codec = EncryptionCodec(key)
    secret = f"card-{uuid.uuid4().hex}"
    client = await Client.connect(
        dev_server.address,
        data_converter=dataclasses.replace(DataConverter.default, payload_codec=codec),
    )
    queue = f"encrypted-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[HelloWorkflow], activities=[greet]):
        handle = await client.start_workflow(
            HelloWorkflow.run, secret, id=f"encrypted-{uuid.uuid4()}", task_queue=queue
        )
        assert await handle.result() == f"hello {secret}"

    # What Perdura holds and answers: the codec's encoding, and no trace of the value.
    raw = await Client.connect(dev_server.address)
    events = [e async for e in raw.get_workflow_handle(handle.id).fetch_history_events()]
    started = events[0].workflow_execution_started_event_attributes.input
    completed = events[-1].workflow_execution_completed_event_attributes.result
    for payloads in (started, completed):
        assert [p.metadata["encoding"] for p in payloads.payloads] == [ENCODING]
        assert secret.encode() not in payloads.SerializeToString()

    # The codec server, run as the README says, opens them for the console's origin.
    env = {**os.environ, "CODEC_KEY": base64.b64encode(key).decode()}
    port = servers.free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--port", str(port), "--origin", ORIGIN],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert "codec server on" in proc.stdout.readline().decode()
        url = f"http://127.0.0.1:{port}/decode"
        body = json_format.MessageToJson(Payloads(payloads=[*started.payloads, *completed.payloads])).encode()
        status, headers, answer = _post(url, body, ORIGIN)
        assert status == 200, answer
        assert headers["Access-Control-Allow-Origin"] == ORIGIN
        decoded = json_format.ParseDict(answer, Payloads())
        assert [json.loads(p.data) for p in decoded.payloads] == [secret, f"hello {secret}"]
        # Another origin gets nothing, and neither does a payload sealed under another key.
        status, headers, _ = _post(url, body, "https://elsewhere.example")
        assert status == 403
        assert "Access-Control-Allow-Origin" not in headers
        other = EncryptionCodec(os.urandom(32)).seal(decoded.payloads[0])
        status, _, answer = _post(url, json_format.MessageToJson(Payloads(payloads=[other])).encode(), ORIGIN)
        assert status == 400
        assert "cannot decode" in answer["message"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
