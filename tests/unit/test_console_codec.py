"""What the run page hands the browser for its codec server: only the payloads the console cannot read,
wherever they sit in an event, in the codec protocol's JSON; and the origin the page's CSP may add."""

from __future__ import annotations

import base64
import json

import pytest
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.failure.v1 import ApplicationFailureInfo, Failure
from temporalio.api.history.v1 import (
    WorkflowExecutionFailedEventAttributes,
    WorkflowExecutionSignaledEventAttributes,
)

from frontend.codec import connect_origin, encoded_payloads
from frontend.middleware import policy

SECRET = Payload(metadata={"encoding": b"binary/encrypted", "key-id": b"k1"}, data=b"\x00\x01sealed")
PLAIN = Payload(metadata={"encoding": b"json/plain"}, data=b'{"a": 1}')


def test_only_encoded_payloads_go_to_the_codec_in_protocol_json():
    attrs = WorkflowExecutionSignaledEventAttributes(
        signal_name="approve", input=Payloads(payloads=[PLAIN, SECRET])
    )
    [found] = encoded_payloads(attrs)
    assert found.path == "input[1]"
    assert found.encoding == "binary/encrypted"
    assert found.text == base64.b64encode(b"\x00\x01sealed").decode()
    assert json.loads(found.wire) == {
        "metadata": {
            "encoding": base64.b64encode(b"binary/encrypted").decode(),
            "key-id": base64.b64encode(b"k1").decode(),
        },
        "data": base64.b64encode(b"\x00\x01sealed").decode(),
    }


def test_payloads_nested_in_failures_are_found():
    failure = Failure(
        message="rejected",
        encoded_attributes=SECRET,
        cause=Failure(application_failure_info=ApplicationFailureInfo(details=Payloads(payloads=[SECRET]))),
    )
    found = encoded_payloads(WorkflowExecutionFailedEventAttributes(failure=failure))
    assert sorted(f.path for f in found) == [
        "failure.cause.applicationFailureInfo.details[0]",
        "failure.encodedAttributes",
    ]


def test_no_encoded_payloads_means_nothing_to_send():
    assert encoded_payloads(Payloads(payloads=[PLAIN])) == []


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://codec.example.com/ns/orders", "https://codec.example.com"),
        ("http://127.0.0.1:8081", "http://127.0.0.1:8081"),
        ("http://[::1]:8081/x", "http://[::1]:8081"),
        ("", ""),
        ("https://codec.example.com;script-src", ""),
        ("https://a.example.com *", ""),
    ],
)
def test_connect_origin(url, origin):
    assert connect_origin(url) == origin


def test_policy_adds_the_codec_origin_to_connect_src_only():
    with_codec = policy("https://codec.example.com")
    assert "connect-src 'self' https://codec.example.com;" in with_codec
    assert "script-src 'self';" in with_codec
    assert "codec.example.com" not in with_codec.replace("connect-src 'self' https://codec.example.com", "")
    assert "connect-src 'self';" in policy()
