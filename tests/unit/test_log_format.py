"""The JSON log format (perdura/logs.py) and the call fields it takes from perdura/logcontext.py."""

from __future__ import annotations

import json
import logging
import sys

import pytest
from perdura import logcontext, logs


class Context:
    """What logcontext.call reads of a grpc.aio servicer context: the status the call ended with."""

    def __init__(self, code: str | None = None) -> None:
        self._code = code

    def code(self):
        return self._code


class Request:
    namespace = "orders.acme"
    request_id = "sdk-request-1"


def record(message: str = "hello %s", *args, exc_info=None, **extra) -> logging.LogRecord:
    entry = logging.LogRecord(
        "perdura.test", logging.WARNING, __file__, 1, message, args or ("world",), exc_info
    )
    entry.__dict__.update(extra)
    return entry


def test_a_line_outside_a_call_has_every_field_empty_but_its_own():
    line = json.loads(logs.JsonFormatter().format(record()))
    assert line.pop("time").endswith("+00:00")
    assert line == {
        "level": "WARNING",
        "logger": "perdura.test",
        "message": "hello world",
        "namespace": "",
        "method": "",
        "request_id": "",
        "trace_id": "",
    }


def test_a_line_inside_a_call_carries_the_call_and_a_code_when_given():
    with logcontext.call(
        "/temporal.api.workflowservice.v1.WorkflowService/SignalWorkflowExecution", Request(), Context()
    ):
        line = json.loads(logs.JsonFormatter().format(record(code="NOT_FOUND")))
    assert line["namespace"] == "orders.acme"
    assert line["method"] == "SignalWorkflowExecution"
    assert line["request_id"] == "sdk-request-1"
    assert line["code"] == "NOT_FOUND"
    assert logcontext.current() is None  # gone once the call returns


def test_a_request_without_an_id_gets_one_per_call():
    first = logcontext.call_of("/s/DescribeNamespace", object())
    second = logcontext.call_of("/s/DescribeNamespace", object())
    assert first.namespace == ""
    assert first.request_id
    assert first.request_id != second.request_id


def test_an_exception_is_one_field_of_the_same_line():
    try:
        raise ValueError("boom")
    except ValueError:
        text = logs.JsonFormatter().format(record(exc_info=sys.exc_info()))
    assert "\n" not in text
    assert "ValueError: boom" in json.loads(text)["exception"]


def test_a_failed_call_writes_one_line_with_its_code(caplog):
    caplog.set_level(logging.DEBUG, logger="perdura.api.calls")
    with logcontext.call("/s/StartWorkflowExecution", Request(), Context("INVALID_ARGUMENT")):
        pass
    with logcontext.call("/s/StartWorkflowExecution", Request(), Context("OK")):
        pass
    (line,) = caplog.records
    assert line.code == "INVALID_ARGUMENT"
    assert line.levelno == logging.INFO
    assert line.getMessage() == "StartWorkflowExecution answered INVALID_ARGUMENT"


@pytest.mark.parametrize(
    ("code", "level"),
    [
        ("INTERNAL", logging.WARNING),
        ("UNAVAILABLE", logging.WARNING),
        ("NOT_FOUND", logging.INFO),
        ("RESOURCE_EXHAUSTED", logging.DEBUG),
        ("CANCELLED", logging.DEBUG),
    ],
)
def test_failures_are_logged_as_loudly_as_they_matter(code, level):
    assert logcontext.failure_level(code) == level


def test_an_unknown_format_is_refused(monkeypatch):
    monkeypatch.setenv("PERDURA_LOG_FORMAT", "xml")
    with pytest.raises(SystemExit, match="PERDURA_LOG_FORMAT must be one of text, json"):
        logs.log_format()
