"""The console's actions use the gRPC API's role table and audit names, and its JSON input rules."""

from __future__ import annotations

import pytest
from temporalio.api.common.v1 import Payload

from engine.api import methods
from frontend.viewer import Viewer
from frontend.views import actions
from tenants.models import Namespace
from tenants.roles import KeyRole

AUDITED = [actions.CANCEL, actions.TERMINATE, actions.SIGNAL, actions.RESET, actions.UPDATE]


@pytest.mark.parametrize("method", AUDITED)
def test_console_actions_are_audited_calls_of_the_method_table(method):
    """The console records an action under the gRPC method's name, so the log reads the same whichever
    interface acted: each must be a method the API audits as a call."""
    assert methods.WORKFLOW_METHODS[method].audit is methods.Audit.CALL


def test_queries_are_reads():
    assert methods.WORKFLOW_METHODS[actions.QUERY].audit is methods.Audit.NONE


@pytest.mark.parametrize(
    ("role", "allowed"),
    [
        (KeyRole.READER, {actions.QUERY}),
        (KeyRole.OPERATOR, {actions.QUERY, *AUDITED}),
        (KeyRole.ADMIN, {actions.QUERY, *AUDITED}),
    ],
)
def test_who_may_act_follows_the_key_roles(role, allowed):
    assert {m for m in [actions.QUERY, *AUDITED] if actions.may(role, m)} == allowed


def _bar(role: KeyRole, status: str) -> dict:
    viewer = Viewer(label="x", namespaces={"orders.acme": (Namespace(name="orders.acme"), role)})
    return actions.toolbar_context(
        viewer, namespace="orders.acme", workflow_id="a/b c", run_id="r1", status=status
    )


def test_a_reader_is_offered_reads_only():
    bar = _bar(KeyRole.READER, "Running")
    assert bar["can_query"] is True
    assert not any(bar[k] for k in ("can_signal", "can_update", "can_cancel", "can_terminate", "can_reset"))


def test_a_closed_run_can_be_reset_and_queried_but_not_signalled_or_stopped():
    bar = _bar(KeyRole.OPERATOR, "Completed")
    assert bar["can_reset"] is True
    assert bar["can_query"] is True
    assert not any(bar[k] for k in ("can_signal", "can_update", "can_cancel", "can_terminate"))
    running = _bar(KeyRole.OPERATOR, "Running")
    assert all(running[k] for k in ("can_signal", "can_update", "can_cancel", "can_terminate", "can_reset"))
    assert running["urls"]["terminate"] == "/namespaces/orders.acme/workflows/a/b%20c/r1/terminate"


def test_json_input_is_one_argument_in_the_sdks_encoding():
    assert actions.json_payloads("  ") is None
    payloads = actions.json_payloads(' {"a": [1, "é"]} ')
    assert payloads is not None
    assert list(payloads.payloads) == [
        Payload(metadata={"encoding": b"json/plain"}, data='{"a":[1,"é"]}'.encode())
    ]
    with pytest.raises(actions.FormError, match="not JSON"):
        actions.json_payloads("'single quotes'")
