"""The REST API over real HTTP against `perdura dev --require-auth`, and keys it creates used by the SDK:
sign up, create two namespaces, a key for each, run a workflow with each key, key A is denied on B,
a key revoked through REST is refused on its next gRPC call."""

from __future__ import annotations

import http.cookiejar
import json
import re
import urllib.error
import urllib.request
import uuid

import pytest
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.e2e.conftest import new_id
from tests.e2e.workflows import HelloWorkflow, greet
from tests.support import servers


class Browser:
    """A cookie-keeping HTTP client that sends the CSRF token as a single-page app does."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        headers = {"Content-Type": "application/json"}
        token = next((c.value for c in self.jar if c.name == "csrftoken"), None)
        if token:
            headers["X-CSRFToken"] = token
            headers["Referer"] = self.base + "/"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        try:
            with self.opener.open(request, timeout=30) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else {}
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")


@pytest.fixture(scope="module")
def web_server(tmp_path_factory):
    ui_port = servers.free_port()
    with servers.dev_server(
        tmp_path_factory.mktemp("rest"), extra=("--ui-port", str(ui_port), "--require-auth")
    ) as running:
        servers.wait_for_port(ui_port, running.processes["dev"], running.logs["dev"])
        yield running, f"http://127.0.0.1:{ui_port}"


async def test_keys_created_through_rest_work_with_the_sdk(web_server):
    server, base = web_server
    browser = Browser(base)
    assert browser.call("GET", "/api/v1/auth/csrf/")[0] == 200
    org = f"r{uuid.uuid4().hex[:8]}"
    status, _ = browser.call(
        "POST",
        "/api/v1/auth/signup/",
        {"email": f"ann@{org}.example", "password": "correct horse battery 9", "organization": org},
    )
    assert status == 202
    # `perdura dev` prints emails to its log: the confirmation link of this sign-up is there.
    sent = server.logs["dev"].read_text()
    token = re.findall(r"signup/confirm/\?token=(\S+)", sent)[-1]
    status, me = browser.call("POST", "/api/v1/auth/signup/confirm/", {"token": token})
    assert status == 201, me
    keys, names, ids = {}, {}, {}
    for name in ("a", "b"):
        status, ns = browser.call("POST", "/api/v1/namespaces/", {"name": name, "retention_days": 2})
        assert status == 201, ns
        status, key = browser.call(
            "POST",
            "/api/v1/api-keys/",
            {"name": f"worker {name}", "role": "operator", "namespaces": [ns["id"]]},
        )
        assert status == 201, key
        keys[name], names[name], ids[name] = key["key"], ns["name"], key["id"]

    for name in ("a", "b"):
        client = await Client.connect(server.address, namespace=names[name], api_key=keys[name], tls=False)
        queue = f"tq-{uuid.uuid4()}"
        async with Worker(client, task_queue=queue, workflows=[HelloWorkflow], activities=[greet]):
            result = await client.execute_workflow(HelloWorkflow.run, name, id=new_id(), task_queue=queue)
        assert result == f"hello {name}"

    a_on_b = await Client.connect(server.address, namespace=names["b"], api_key=keys["a"], tls=False)
    with pytest.raises(RPCError) as caught:
        await a_on_b.start_workflow(HelloWorkflow.run, "x", id=new_id(), task_queue="nowhere")
    assert caught.value.status == RPCStatusCode.PERMISSION_DENIED

    client_a = await Client.connect(server.address, namespace=names["a"], api_key=keys["a"], tls=False)
    await client_a.workflow_service.describe_namespace(rr.DescribeNamespaceRequest(namespace=names["a"]))
    status, revoked = browser.call("POST", f"/api/v1/api-keys/{ids['a']}/revoke/", {})
    assert status == 200, revoked
    with pytest.raises(RPCError) as caught:
        await client_a.workflow_service.describe_namespace(rr.DescribeNamespaceRequest(namespace=names["a"]))
    assert caught.value.status == RPCStatusCode.UNAUTHENTICATED
    assert keys["a"] not in server.logs["dev"].read_text()
