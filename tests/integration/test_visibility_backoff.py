"""While OpenSearch is backed off, a shard's pass leaves its visibility rows at once: it does not go round
and round until its budget is spent (which, on `perdura dev`'s one thread, held up every call: a
StartWorkflowExecution took 3 s during an outage). Real Postgres, the real shard code."""

from __future__ import annotations

import time

import pytest
from perdura import clock

from engine.history.mutation import TransferKind
from engine.models import Transfer
from engine.shards import timers, visibility_index
from engine.shards.budget import Budget
from tests.integration.test_shard_parking import started_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def opensearch_backed_off(settings):
    settings.PERDURA_VISIBILITY = "opensearch"
    visibility_index.backoff.not_before = time.monotonic() + 60
    yield
    visibility_index.backoff.succeeded()


def only_a_visibility_row(run) -> None:
    """The run's transfer rows: one VISIBILITY row (the start's own rows go)."""
    Transfer.objects.filter(execution=run).delete()
    Transfer.objects.create(
        shard=run.shard, execution=run, kind=TransferKind.VISIBILITY, event_id=0, created_at=clock.now()
    )


def test_a_pass_leaves_visibility_rows_waiting_out_the_backoff_at_once(opensearch_backed_off, monkeypatch):
    run = started_run()
    only_a_visibility_row(run)
    rounds = []
    probe = timers._due_queues

    def counted(*args, **kwargs):
        due = probe(*args, **kwargs)
        rounds.append(due)
        return due

    monkeypatch.setattr(timers, "_due_queues", counted)
    assert timers.process_shard(run.shard, "w", budget=Budget(5.0)) == 0
    # One round found the row due and did nothing with it; before, the pass went round for its 5 s.
    assert rounds == [{"transfers"}]
    assert Transfer.objects.filter(execution=run, kind=TransferKind.VISIBILITY).count() == 1
    assert 59 < visibility_index.backoff.seconds_left() <= 60


def test_the_rows_go_out_once_the_backoff_ends(opensearch_backed_off, monkeypatch):
    """With the backoff over the pass asks OpenSearch again (here: its request fails, and the backoff grows
    from its first step)."""
    run = started_run()
    only_a_visibility_row(run)
    visibility_index.backoff.succeeded()
    asked = []

    class Down:
        def ensure_index(self):
            asked.append("ensure_index")
            raise ConnectionError("refused")

    monkeypatch.setattr(visibility_index, "backend", Down)
    timers.process_shard(run.shard, "w", budget=Budget(5.0))
    assert asked == ["ensure_index"]
    assert visibility_index.backoff.delay == visibility_index.MIN_BACKOFF
    assert Transfer.objects.filter(execution=run, kind=TransferKind.VISIBILITY).count() == 1
