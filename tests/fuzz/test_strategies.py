"""The fuzz's own machinery, without a server: every request type draws and serializes, every Command type
comes up, and the invalid-UTF-8 marker really is invalid on the wire (else the gRPC fuzz would pass for the
wrong reason)."""

from __future__ import annotations

import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.api.command.v1 import message_pb2 as command_pb2
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from tests.fuzz.grpc_campaign import all_methods, last_frame
from tests.fuzz.strategies import BAD_UTF8, Builder, Pools, bad_utf8_paths, command_lists, serialize

QUICK = settings(
    max_examples=3, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
)


def test_the_method_list_is_both_services_whole():
    names = {m.name for m in all_methods()}
    assert len(names) >= 134  # temporalio 1.31: 122 WorkflowService + 12 OperatorService
    assert {"StartWorkflowExecution", "RespondWorkflowTaskCompleted", "DeleteNamespace"} <= names


@pytest.mark.parametrize("method", all_methods(), ids=lambda m: m.name)
def test_every_request_type_draws_and_serializes(method):
    builder = Builder(Pools(workflow_ids=["w"], run_ids=["r"], task_queues=["q"], task_tokens=[b"t"]))

    @QUICK
    @given(builder.message(method.input.DESCRIPTOR))
    def draw(request):
        assert isinstance(request, method.input)
        serialize(request)

    draw()


def test_command_lists_cover_every_command_type():
    seen: set[str] = set()

    @settings(max_examples=300, derandomize=True, database=None, deadline=None)
    @given(command_lists(Builder(Pools(task_queues=["q"]), timeouts_always=True)))
    def draw(commands):
        seen.update(c.WhichOneof("attributes") or "" for c in commands)

    draw()
    every = {f.name for f in command_pb2.Command.DESCRIPTOR.oneofs_by_name["attributes"].fields}
    assert every <= seen, every - seen


@given(st.text(max_size=20))
@settings(max_examples=20, derandomize=True, database=None)
def test_bad_utf8_marker_is_invalid_on_the_wire_and_keeps_the_framing(prefix):
    request = rr.DescribeNamespaceRequest(namespace=prefix + BAD_UTF8, id="x")
    wire = serialize(request)
    assert len(wire) == len(request.SerializeToString())
    with pytest.raises(DecodeError, match="UTF-8"):
        rr.DescribeNamespaceRequest.FromString(wire)
    assert bad_utf8_paths(request) == ["namespace"]


def test_one_finding_per_bug_whatever_the_value():
    def traceback(value: int) -> str:
        return (
            "Traceback (most recent call last):\n"
            '  File "/work/x/engine/api/visibility.py", line 145, in _legacy_query\n'
            '  File "/v/site-packages/google/protobuf/internal/well_known_types.py", line 327, in _Check\n'
            f"ValueError: Timestamp is not valid: Nanos {value} must be in a range [0, 999999999]."
        )

    assert last_frame(traceback(-98)) == last_frame(traceback(2147483647))
    assert last_frame(traceback(1)).startswith("engine/api/visibility.py:145 in _legacy_query -> ")
