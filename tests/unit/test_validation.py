"""Request validation: payload limits reach every payload a command carries."""

from __future__ import annotations

import pytest
from temporalio.api.command.v1 import (
    Command,
    CompleteWorkflowExecutionCommandAttributes,
    RecordMarkerCommandAttributes,
    StartTimerCommandAttributes,
)
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.enums.v1 import CommandType

from engine import validation
from engine.errors import InvalidArgument

BIG = Payloads(payloads=[Payload(data=b"x" * (validation.BLOB_SIZE_LIMIT + 1))])
SMALL = Payloads(payloads=[Payload(data=b"x")])


def marker(details: Payloads) -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_RECORD_MARKER,
        record_marker_command_attributes=RecordMarkerCommandAttributes(
            marker_name="m", details={"data": details}
        ),
    )


def complete(result: Payloads) -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION,
        complete_workflow_execution_command_attributes=CompleteWorkflowExecutionCommandAttributes(
            result=result
        ),
    )


@pytest.mark.parametrize(
    "command",
    [marker(SMALL), complete(SMALL), Command(start_timer_command_attributes=StartTimerCommandAttributes())],
)
def test_small_payloads_pass(command):
    validation.command_payloads(command)


@pytest.mark.parametrize("command", [marker(BIG), complete(BIG)])
def test_oversized_payloads_are_refused_naming_the_limit(command):
    with pytest.raises(InvalidArgument, match="2097152 bytes"):
        validation.command_payloads(command)
