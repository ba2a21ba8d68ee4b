"""The sealing rules of a data subject's runs, without a database: which run has a subject, what its
children and next runs inherit, which payloads the walk reaches (all but search attributes), and that a
blob of a run without a subject is read as before."""

from __future__ import annotations

import json

import pytest
from temporalio.api.command.v1 import (
    Command,
    ContinueAsNewWorkflowExecutionCommandAttributes,
    StartChildWorkflowExecutionCommandAttributes,
    UpsertWorkflowSearchAttributesCommandAttributes,
)
from temporalio.api.common.v1 import Header, Memo, Payload, Payloads, SearchAttributes, WorkflowType
from temporalio.api.enums.v1 import CommandType, WorkflowTaskFailedCause
from temporalio.api.failure.v1 import ApplicationFailureInfo, Failure
from temporalio.api.history.v1 import (
    History,
    HistoryEvent,
    WorkflowExecutionSignaledEventAttributes,
    WorkflowExecutionStartedEventAttributes,
)
from temporalio.api.taskqueue.v1 import TaskQueue

from engine.history import subjects
from engine.persistence import subject_seal
from tests.unit import history_harness as h


def _json(value: object) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(value).encode())


def _attributes(**values: object) -> SearchAttributes:
    return SearchAttributes(indexed_fields={k: _json(v) for k, v in values.items()})


@pytest.mark.parametrize(
    ("attributes", "subject"),
    [
        (b"", None),
        (_attributes(CustomerId="c-1").SerializeToString(), None),
        (_attributes(PerduraDataSubject="alice").SerializeToString(), "alice"),
        (_attributes(PerduraDataSubject="").SerializeToString(), None),
        (_attributes(PerduraDataSubject=None).SerializeToString(), None),
        (_attributes(PerduraDataSubject=["a", "b"]).SerializeToString(), None),
    ],
)
def test_a_run_has_the_subject_its_search_attribute_names(attributes, subject):
    assert subjects.subject_of(attributes) == subject


def test_children_and_next_runs_inherit_the_subject_unless_they_name_one():
    parent = _attributes(PerduraDataSubject="alice", Other="x").SerializeToString()
    inherited = subjects.inherited(parent, None)
    assert inherited is not None
    assert subjects.subject_of(inherited.SerializeToString()) == "alice"
    own = subjects.inherited(parent, _attributes(Tag="t"))
    assert own is not None
    assert set(own.indexed_fields) == {"Tag", "PerduraDataSubject"}
    other = _attributes(PerduraDataSubject="bob")
    assert subjects.inherited(parent, other) is other
    # A parent without a subject changes nothing.
    plain = _attributes(Tag="t")
    assert subjects.inherited(b"", plain) is plain
    assert subjects.inherited(b"", None) is None


@pytest.mark.parametrize(
    ("current", "upsert", "allowed"),
    [
        ({"PerduraDataSubject": "alice"}, {"Tag": "t"}, True),
        ({"PerduraDataSubject": "alice"}, {"PerduraDataSubject": "alice"}, True),
        ({"PerduraDataSubject": "alice"}, {"PerduraDataSubject": "bob"}, False),
        ({"PerduraDataSubject": "alice"}, {"PerduraDataSubject": None}, False),
        ({}, {"PerduraDataSubject": "alice"}, False),
        ({}, {"PerduraDataSubject": None}, True),
    ],
)
def test_an_upsert_may_not_set_change_or_remove_the_subject(current, upsert, allowed):
    existing = _attributes(**current).SerializeToString() if current else b""
    assert subjects.upsert_keeps_subject(existing, _attributes(**upsert)) is allowed


def test_the_walk_reaches_every_payload_but_search_attributes():
    event = HistoryEvent(
        event_id=1,
        workflow_execution_started_event_attributes=WorkflowExecutionStartedEventAttributes(
            input=Payloads(payloads=[_json("in-1"), _json("in-2")]),
            memo=Memo(fields={"m": _json("memo")}),
            header=Header(fields={"h": _json("header")}),
            search_attributes=_attributes(PerduraDataSubject="alice"),
            continued_failure=Failure(
                message="boom",
                application_failure_info=ApplicationFailureInfo(details=Payloads(payloads=[_json("detail")])),
                cause=Failure(encoded_attributes=_json("cause")),
            ),
        ),
    )
    seen: list[str] = []
    subject_seal.each_payload(event, lambda p: seen.append(json.loads(p.data)))
    assert sorted(seen) == sorted(["in-1", "in-2", "memo", "header", "detail", "cause"])


def test_a_blob_without_the_mark_is_read_as_it_is_without_keys():
    history = History(
        events=[
            HistoryEvent(
                event_id=1,
                workflow_execution_signaled_event_attributes=WorkflowExecutionSignaledEventAttributes(
                    input=Payloads(payloads=[_json("secret")])
                ),
            )
        ]
    )
    plain = history.SerializeToString()
    assert not plain.startswith(subject_seal.MARK)
    # No key lookup happens: a Keys object that would fail on use is never asked.
    assert subject_seal.open_history(plain, keys=None) == history  # type: ignore[arg-type]
    memo = Memo(fields={"m": _json("x")}).SerializeToString()
    assert subject_seal.open_memo(None, memo) == memo  # type: ignore[arg-type]


def test_an_erased_marker_names_its_key_and_carries_no_data():
    marker = subject_seal.erased_marker("k1")
    assert marker.metadata["encoding"] == b"binary/x-perdura-erased"
    assert marker.metadata["perdura-subject-key"] == b"k1"
    assert marker.data == b""


def test_the_subject_attribute_is_predefined_in_every_namespace():
    from visibility.search_attributes import PREDEFINED, SaType

    assert PREDEFINED[subjects.DATA_SUBJECT] is SaType.Keyword


def _subject_run(subject: str) -> h.Run:
    request = h.start_request()
    request.search_attributes.CopyFrom(_attributes(PerduraDataSubject=subject))
    run = h.Run(request)
    run.start_wft(1)
    return run


def _upsert(**values: object) -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
        upsert_workflow_search_attributes_command_attributes=UpsertWorkflowSearchAttributesCommandAttributes(
            search_attributes=_attributes(**values)
        ),
    )


def test_a_workflow_task_changing_the_subject_fails_with_bad_search_attributes():
    run = _subject_run("alice")
    failure = run.complete_wft(2, _upsert(PerduraDataSubject="bob"))
    assert failure is not None
    assert failure.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES
    assert subjects.subject_of(run.state.search_attributes) == "alice"
    # Other attributes still upsert.
    run.start_wft(3)
    assert run.complete_wft(4, _upsert(Tag="t")) is None
    assert subjects.subject_of(run.state.search_attributes) == "alice"


def test_a_child_started_by_a_subjects_run_carries_the_subject():
    run = _subject_run("alice")
    child = Command(
        command_type=CommandType.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION,
        start_child_workflow_execution_command_attributes=StartChildWorkflowExecutionCommandAttributes(
            namespace="default",
            workflow_id="child-1",
            workflow_type=WorkflowType(name="Child"),
            task_queue=TaskQueue(name=h.TASK_QUEUE),
        ),
    )
    assert run.complete_wft(2, child) is None
    initiated = next(
        e for e in run.new_events if e.HasField("start_child_workflow_execution_initiated_event_attributes")
    )
    attributes = initiated.start_child_workflow_execution_initiated_event_attributes.search_attributes
    assert subjects.subject_of(attributes.SerializeToString()) == "alice"


def test_a_continue_as_new_naming_other_attributes_keeps_the_subject():
    run = _subject_run("alice")
    command = Command(
        command_type=CommandType.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION,
        continue_as_new_workflow_execution_command_attributes=ContinueAsNewWorkflowExecutionCommandAttributes(
            workflow_type=WorkflowType(name="MyWorkflow"),
            task_queue=TaskQueue(name=h.TASK_QUEUE),
            search_attributes=_attributes(Tag="next"),
        ),
    )
    assert run.complete_wft(2, command) is None
    continued = run.last.continued
    assert continued is not None
    assert subjects.subject_of(continued.state.search_attributes) == "alice"
