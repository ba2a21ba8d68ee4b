"""The console's whole-history read (engine/services/console_reads.run_history), on Postgres: a long
history is kept parsed and later reads add only the events appended since; what it answers is always the
history as run_all_events reads it, up to the row's next event id; a kept copy is read again whole once
HISTORY_CACHE_SECONDS have passed."""

from __future__ import annotations

import uuid

import pytest
from django.core.cache import caches

from engine.models import Execution
from engine.services import console_reads, workflows
from tenants.models import Namespace
from tests.integration.test_rest_api import create_namespace, signup
from tests.integration.test_run_export_rest import _start

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_throttles():
    """Each test signs people up: the sign-up throttle would refuse them after a few runs."""
    caches["throttle"].clear()
    yield
    caches["throttle"].clear()


def _signal(namespace: Namespace, workflow_id: str, run_id: str, n: int) -> None:
    workflows.workflow_signal(
        namespace=namespace,
        workflow_id=workflow_id,
        run_id=run_id,
        signal_name=f"s{n}",
        input=None,
        identity="test",
        request_id=str(uuid.uuid4()),
        header=None,
    )


def _ids(events) -> list[int]:
    return [e.event_id for e in events]


def test_a_kept_history_grows_by_the_new_batches_and_equals_a_full_read(monkeypatch):
    monkeypatch.setattr(console_reads, "HISTORY_CACHE_MIN_EVENTS", 3)
    owner, _ = signup()
    namespace = Namespace.objects.get(pk=create_namespace(owner, "orders")["id"])
    workflow_id, run_id = _start(str(namespace.id))
    for n in range(3):
        _signal(namespace, workflow_id, run_id, n)
    execution = Execution.objects.get(namespace_id=namespace.id, run_id=run_id)
    first = console_reads.run_history(execution)
    assert _ids(first) == list(range(1, execution.next_event_id))
    assert [e.SerializeToString(deterministic=True) for e in first] == [
        e.SerializeToString(deterministic=True) for e in console_reads.run_all_events(execution)
    ]

    _signal(namespace, workflow_id, run_id, 3)
    stale_row = execution  # a render that read the row before the signal sees the history as it was
    assert console_reads.run_history(stale_row) is first
    execution = Execution.objects.get(pk=execution.pk)
    grown = console_reads.run_history(execution)
    assert _ids(grown) == list(range(1, execution.next_event_id))
    assert grown[-1].workflow_execution_signaled_event_attributes.signal_name == "s3"
    # The events read before are the same objects: only the new batch was read and parsed.
    assert all(a is b for a, b in zip(first, grown, strict=False))

    # Past HISTORY_CACHE_SECONDS the history is read whole again (new objects, the same events).
    monkeypatch.setattr(console_reads, "HISTORY_CACHE_SECONDS", 0.0)
    again = console_reads.run_history(execution)
    assert _ids(again) == _ids(grown)
    assert again[0] is not grown[0]


def test_short_histories_are_not_kept(monkeypatch):
    owner, _ = signup()
    namespace = Namespace.objects.get(pk=create_namespace(owner, "orders")["id"])
    workflow_id, run_id = _start(str(namespace.id))
    execution = Execution.objects.get(namespace_id=namespace.id, run_id=run_id)
    one = console_reads.run_history(execution)
    two = console_reads.run_history(execution)
    assert _ids(one) == _ids(two) == [1, 2]
    assert one[0] is not two[0]
