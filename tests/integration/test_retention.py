"""Retention that acts: a closed run's retention row, due at close + retention, deletes the run from
every table in fenced, resumable steps, and a failing step backs off and is parked like any shard
queue row (engine/shards/retention.py). Real Postgres, the real shard code."""

from __future__ import annotations

import importlib
import uuid
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connection, models, transaction
from perdura import clock
from temporalio.api.common.v1 import WorkflowType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from engine.errors import NotFound
from engine.history.mutation import TransferKind
from engine.history.retention import Step
from engine.models import (
    CurrentRun,
    Execution,
    HistoryBatch,
    Query,
    Retention,
    ShardLease,
    Task,
    Transfer,
)
from engine.persistence import leases, store
from engine.persistence import retention as retention_store
from engine.services import workflows
from engine.shards import parking, retention, timers
from tenants.errors import NamespaceError
from tenants.models import Namespace
from tenants.services.namespaces import namespace_register, namespace_set_retention

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

NOT_PER_RUN = {
    "ShardLease",
    "ShardOwner",
    "Schedule",
    "Reencryption",
    "CustomSearchAttribute",
    "BatchOperation",
    "BatchTarget",
    "HistoryArchive",
    "ArchivedVisibilityRecord",
    "WorkerDeployment",
    "WorkerDeploymentVersion",
    "WorkerDeploymentTaskQueue",
}
"""Engine and visibility tables that hold no row of a run. A new table is either linked to its run
(a foreign key to Execution, or workflow_id and run_id columns) and then checked below, or named here.
A batch's targets name runs but are the batch's record of what it acted on: they go with the batch, not
with a run. An archived run's location and archived visibility record outlive the run on purpose. Worker deployments
belong to the namespace and its pollers, not to any run."""


@pytest.fixture(autouse=True)
def three_attempts(settings):
    settings.PERDURA_SHARD_MAX_ATTEMPTS = 3


def closed_run(*, retention_seconds: int = 3600, namespace: Namespace | None = None) -> Execution:
    """A run started and terminated (a close) through the services the gRPC API calls."""
    if namespace is None:
        namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
        namespace = namespace_set_retention(
            namespace=namespace, retention=timedelta(seconds=retention_seconds)
        )
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=f"wf-{uuid.uuid4()}",
        workflow_type=WorkflowType(name="T"),
        task_queue=TaskQueue(name=f"tq-{uuid.uuid4()}"),
    )
    result = workflows.workflow_start(namespace=namespace, request=request)
    workflows.workflow_terminate(
        namespace=namespace,
        workflow_id=request.workflow_id,
        run_id=result.run_id,
        reason="done",
        details=None,
        identity="test",
    )
    return Execution.objects.get(namespace=namespace, run_id=result.run_id)


def with_leftovers(run: Execution) -> None:
    """Rows a closed run may still have: a query in flight, its task, a transfer owed to another run."""
    query = Query.objects.create(
        namespace_id=run.namespace_id, execution=run, request=b"q", created_at=clock.now()
    )
    Task.objects.create(
        namespace_id=run.namespace_id,
        task_queue="tq",
        kind=Task.Kind.QUERY,
        execution=run,
        scheduled_event_id=0,
        visible_at=clock.now(),
        query=query,
    )
    Transfer.objects.create(
        shard=run.shard,
        execution=run,
        kind=TransferKind.CHILD_CLOSED,
        event_id=3,
        details=b"",
        created_at=clock.now(),
    )


def make_due(run: Execution) -> Retention:
    Retention.objects.filter(execution_id=run.pk).update(due_at=clock.now() - timedelta(milliseconds=1))
    return Retention.objects.get(execution_id=run.pk)


def remaining_rows(run: Execution) -> dict[str, int]:
    """Rows of `run` left in every engine and visibility table, by table (empty: none).

    Walks the models rather than a list, so a table added later that holds rows of runs fails here
    until the deletion covers it (or it is named in NOT_PER_RUN)."""
    left: dict[str, int] = {}
    for model in [
        *apps.get_app_config("engine").get_models(),
        *apps.get_app_config("visibility").get_models(),
    ]:
        links = [
            f.name
            for f in model._meta.get_fields()
            if isinstance(f, models.ForeignKey | models.OneToOneField) and f.related_model is Execution
        ]
        names = {f.name for f in model._meta.get_fields()}
        if model.__name__ in NOT_PER_RUN:
            continue
        if model is Execution:
            count = Execution.objects.filter(pk=run.pk).count()
        elif links:
            query = models.Q()
            for link in links:
                query |= models.Q(**{f"{link}_id": run.pk})
            count = model._default_manager.filter(query).count()
        elif {"workflow_id", "run_id"} <= names:
            count = model._default_manager.filter(workflow_id=run.workflow_id, run_id=run.run_id).count()
        else:
            raise AssertionError(f"{model.__name__}: is it deleted with its run? (see NOT_PER_RUN)")
        if count:
            left[model._meta.db_table] = count
    return left


def test_closing_a_run_writes_its_retention_row_due_at_close_plus_the_retention_then():
    run = closed_run(retention_seconds=45)
    row = Retention.objects.get(execution_id=run.pk)
    assert (row.shard, row.step, row.namespace_id) == (run.shard, Step.ARCHIVE, run.namespace_id)
    assert row.due_at == run.close_time + timedelta(seconds=45)

    # A later change applies to runs closing afterwards; this one keeps its due time.
    namespace_set_retention(namespace=run.namespace, retention=timedelta(days=2))
    later = closed_run(namespace=Namespace.objects.get(pk=run.namespace_id))
    assert Retention.objects.get(execution_id=later.pk).due_at == later.close_time + timedelta(days=2)
    assert Retention.objects.get(execution_id=run.pk).due_at == row.due_at


def test_the_operator_floor_bounds_the_retention(settings):
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    with pytest.raises(NamespaceError, match="30s"):
        namespace_set_retention(namespace=namespace, retention=timedelta(seconds=29))
    with pytest.raises(NamespaceError, match="90 days"):
        namespace_set_retention(namespace=namespace, retention=timedelta(days=91))
    settings.PERDURA_RETENTION_MIN_SECONDS = 1
    namespace_set_retention(namespace=namespace, retention=timedelta(seconds=1))
    assert Namespace.objects.get(pk=namespace.pk).retention == timedelta(seconds=1)


def test_a_due_run_is_deleted_from_every_table_and_its_history_is_not_found():
    run = closed_run()
    kept = closed_run(namespace=run.namespace)  # same namespace, not due: untouched
    with_leftovers(run)
    assert set(remaining_rows(run)) >= {
        "engine_execution",
        "engine_historybatch",
        "engine_query",
        "engine_task",
        "engine_transfer",
        "engine_retention",
        "visibility_visibilityrecord",
    }
    make_due(run)
    assert run.shard in timers.due_shards()
    timers.process_shard(run.shard, "w")

    assert remaining_rows(run) == {}
    assert not CurrentRun.objects.filter(workflow_id=run.workflow_id).exists()
    with pytest.raises(NotFound):
        store.find_execution(run.namespace_id, run.workflow_id, run.run_id, lock=False)
    assert "engine_historybatch" in remaining_rows(kept)
    assert Retention.objects.filter(execution_id=kept.pk).exists()


def test_a_stale_range_id_cannot_delete():
    run = closed_run()
    row = make_due(run)
    old = leases.acquire(run.shard, "worker-a")
    assert old is not None
    ShardLease.objects.filter(shard=run.shard).update(expires_at=clock.now() - timedelta(seconds=1))
    new = leases.acquire(run.shard, "worker-b")
    assert new is not None
    assert new != old

    with pytest.raises(leases.LeaseLost):
        retention.delete_run(row.pk, shard=run.shard, range_id=old)
    with pytest.raises(leases.LeaseLost):
        retention.process(run.shard, old)
    assert HistoryBatch.objects.filter(execution_id=run.pk).exists()
    assert Retention.objects.get(pk=row.pk).step == Step.ARCHIVE

    assert retention.delete_run(row.pk, shard=run.shard, range_id=new)
    assert remaining_rows(run) == {}


def test_a_deletion_stopped_half_way_resumes_and_steps_run_again_delete_nothing_more():
    run = closed_run()
    with_leftovers(run)
    row = make_due(run)
    batches = HistoryBatch.objects.filter(execution_id=run.pk).count()
    assert batches >= 2
    # Stopped after the visibility step and one history batch (a crash, or a spent budget).
    assert retention_store.step_txn(row, Step.VISIBILITY) is Step.HISTORY
    assert retention_store.step_txn(row, Step.HISTORY, limit=1) is Step.HISTORY
    assert HistoryBatch.objects.filter(execution_id=run.pk).count() == batches - 1
    assert "visibility_visibilityrecord" not in remaining_rows(run)
    assert Retention.objects.get(pk=row.pk).step == Step.HISTORY
    # A step that finished runs again (a redelivered pass): it deletes nothing more and moves on.
    assert retention_store.step_txn(row, Step.VISIBILITY) is Step.HISTORY

    timers.process_shard(run.shard, "w")
    assert remaining_rows(run) == {}
    # And once more after the end: nothing to find, nothing raised.
    assert retention.process(run.shard, leases.acquire(run.shard, "w2") or 0) == 0


def test_a_failing_step_backs_off_is_parked_and_redriven():
    run = closed_run()
    behind = closed_run(namespace=run.namespace)
    Execution.objects.filter(pk=behind.pk).update(shard=run.shard)
    Retention.objects.filter(execution_id=behind.pk).update(shard=run.shard)
    row = make_due(run)
    make_due(behind)
    # The database refuses to delete this run's history (as a broken disk or a permission would).
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION refuse_delete() RETURNS trigger AS $$ BEGIN "
            f"IF OLD.execution_id = {run.pk} THEN RAISE EXCEPTION 'history is read-only'; END IF; "
            "RETURN OLD; END $$ LANGUAGE plpgsql"
        )
        cursor.execute(
            "CREATE TRIGGER refuse_delete BEFORE DELETE ON engine_historybatch "
            "FOR EACH ROW EXECUTE FUNCTION refuse_delete()"
        )
    try:
        before = clock.now()
        timers.process_shard(run.shard, "w")
        row.refresh_from_db()
        assert (row.failures, row.step, row.parked_at) == (1, Step.HISTORY, None)
        assert "history is read-only" in row.last_error
        assert before + timedelta(seconds=1) <= row.due_at <= clock.now() + timedelta(seconds=1)
        assert remaining_rows(behind) == {}  # the row behind it went on

        for attempt in (2, 3):
            make_due(run)
            timers.process_shard(run.shard, "w")
            row.refresh_from_db()
            assert row.failures == attempt
        assert row.parked_at is not None
        assert parking.parked_counts()["retention"] == 1
        (parked,) = parking.parked_list(namespace=run.namespace.name)
        assert (parked.id, parked.queue, parked.kind, parked.attempts) == (
            f"retention:{row.pk}",
            "retention",
            "RETENTION_HISTORY",
            3,
        )
        assert (parked.workflow_id, parked.run_id) == (run.workflow_id, run.run_id)
        make_due(run)
        assert run.shard not in timers.due_shards()  # parked: out of the sweep's probes
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER refuse_delete ON engine_historybatch")
            cursor.execute("DROP FUNCTION refuse_delete()")

    assert parking.parked_redrive(ids=[f"retention:{row.pk}"]) == 1
    assert run.shard in timers.due_shards()
    timers.process_shard(run.shard, "w")
    assert remaining_rows(run) == {}
    assert parking.parked_counts()["retention"] == 0


def test_the_sweep_probes_each_shard_for_its_earliest_row():
    run = closed_run(retention_seconds=3600)
    assert run.shard not in timers.due_shards()
    first = retention_store.earliest_by_shard()[run.shard]
    assert first == Retention.objects.get(execution_id=run.pk).due_at
    assert timers.next_fire_at() is not None
    make_due(run)
    assert run.shard in retention.due_shards(clock.now())


def test_the_backfill_gives_runs_closed_before_retention_their_row():
    run = closed_run(retention_seconds=120)
    Retention.objects.filter(execution_id=run.pk).delete()
    migration = importlib.import_module("engine.migrations.0008_retention")
    with connection.schema_editor() as editor:
        migration.backfill(apps, editor)
        migration.backfill(apps, editor)  # idempotent
    row = Retention.objects.get(execution_id=run.pk)
    assert row.due_at == run.close_time + timedelta(seconds=120)
    assert (row.shard, row.step) == (run.shard, Step.ARCHIVE)


def test_deleting_a_namespace_deletes_its_runs_through_retention():
    from engine.shards import namespace_purge
    from tenants.services.namespaces import namespace_delete

    closed = closed_run(retention_seconds=86400)
    namespace = Namespace.objects.get(pk=closed.namespace_id)
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=f"wf-{uuid.uuid4()}",
        workflow_type=WorkflowType(name="T"),
        task_queue=TaskQueue(name=f"tq-{uuid.uuid4()}"),
    )
    started = workflows.workflow_start(namespace=namespace, request=request)
    running = Execution.objects.get(namespace=namespace, run_id=started.run_id)
    other = closed_run(retention_seconds=86400)  # another namespace: untouched
    assert namespace_purge.purge_pass() == 0  # nothing deleted yet

    namespace_delete(namespace=namespace)
    assert namespace_purge.purge_pass() == 3  # one run terminated, two retention rows due now
    assert Execution.objects.get(pk=running.pk).close_time is not None
    for shard in {closed.shard, running.shard}:
        timers.process_shard(shard, "w")
    assert remaining_rows(closed) == {}
    assert remaining_rows(running) == {}
    assert namespace_purge.purge_pass() == 0
    assert Retention.objects.get(execution_id=other.pk).due_at > clock.now() + timedelta(hours=23)


def _plan_nodes(plan: dict) -> list[dict]:
    nodes = [plan]
    for child in plan.get("Plans", []):
        nodes += _plan_nodes(child)
    return nodes


def test_the_sweep_probe_reads_one_index_entry_per_shard_not_the_future_rows():
    """Thousands of closed runs waiting out their retention cost the sweep one index probe per shard."""
    import json

    from django.conf import settings as django_settings

    run = closed_run(retention_seconds=86400)
    with connection.cursor() as cursor:
        # 3,000 more closed runs (bare rows: only their retention rows matter here), spread over the shards.
        cursor.execute(
            "INSERT INTO engine_execution (namespace_id, workflow_id, run_id, shard, workflow_type, task_queue, "
            "status, start_time, execution_time, close_time, next_event_id, db_version, state) "
            "SELECT %s, 'bulk-' || g, 'r-' || g, g %% %s, 'T', 'q', 2, now(), now(), now(), 3, 1, '' "
            "FROM generate_series(1, 3000) g",
            [run.namespace_id, django_settings.PERDURA_SHARDS],
        )
        cursor.execute(
            "INSERT INTO engine_retention (shard, due_at, execution_id, namespace_id, step, failures, last_error) "
            "SELECT shard, now() + interval '1 day' + (id || ' seconds')::interval, id, namespace_id, 0, 0, '' "
            "FROM engine_execution WHERE workflow_id LIKE 'bulk-%%'"
        )
        cursor.execute("ANALYZE engine_retention")
        sql = (
            "SELECT s.column1, (SELECT MIN(r.due_at) FROM engine_retention r "
            "WHERE r.shard = s.column1 AND r.parked_at IS NULL) FROM (VALUES "
            + ", ".join(f"({s})" for s in range(django_settings.PERDURA_SHARDS))
            + ") AS s"
        )
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
        (plan,) = cursor.fetchone()[0]
    plan = plan if isinstance(plan, dict) else json.loads(plan)
    scans = [n for n in _plan_nodes(plan["Plan"]) if n.get("Relation Name") == "engine_retention"]
    assert scans
    assert all(n["Node Type"] in ("Index Scan", "Index Only Scan") for n in scans), scans
    assert all(n["Index Name"] == "retention_live_due" for n in scans)
    read = sum(n["Actual Rows"] * n["Actual Loops"] for n in scans)
    assert read <= django_settings.PERDURA_SHARDS  # the first live row of each shard, no more
    assert len(retention_store.earliest_by_shard()) == django_settings.PERDURA_SHARDS


def _runs_on_one_shard(count: int) -> list[Execution]:
    """`count` closed runs of one namespace, moved to the first one's shard and due now."""
    first = closed_run()
    runs = [first, *(closed_run(namespace=first.namespace) for _ in range(count - 1))]
    ids = [r.pk for r in runs]
    Execution.objects.filter(pk__in=ids).update(shard=first.shard)
    Retention.objects.filter(execution_id__in=ids).update(shard=first.shard)
    for run in runs:
        run.shard = first.shard
        make_due(run)
    return runs


def test_the_due_runs_of_a_shard_go_together_in_a_few_statements():
    """A group of due runs is deleted with a handful of statements for all of them, not a dozen per run."""
    from django.test.utils import CaptureQueriesContext

    runs = _runs_on_one_shard(30)
    with_leftovers(runs[0])
    lease = leases.acquire(runs[0].shard, "w")
    assert lease is not None
    with CaptureQueriesContext(connection) as queries:
        assert retention.process(runs[0].shard, lease) == 30
    for run in runs:
        assert remaining_rows(run) == {}
    # One run at a time took 26 statements a run (each step its own fenced transaction).
    assert len(queries.captured_queries) < 40, [q["sql"][:80] for q in queries.captured_queries]


def test_a_group_stopped_at_its_row_bound_saves_its_step_and_goes_on():
    runs = _runs_on_one_shard(3)
    pks = [make_due(r).pk for r in runs]
    history = HistoryBatch.objects.filter(execution_id__in=[r.pk for r in runs]).count()
    assert history >= 3

    def group(step: Step, limit: int = retention_store.GROUP_ROWS) -> Step | None:
        with transaction.atomic():
            return retention_store.group_txn(retention_store.lock_group(pks, clock.now()), step, limit=limit)

    # One history row a statement: the group stops in the history step, every row saying so.
    assert group(Step.VISIBILITY, limit=1) is Step.HISTORY
    assert HistoryBatch.objects.filter(execution_id__in=[r.pk for r in runs]).count() == history - 1
    assert set(Retention.objects.filter(pk__in=pks).values_list("step", flat=True)) == {Step.HISTORY}
    assert all("visibility_visibilityrecord" not in remaining_rows(r) for r in runs)
    # The next transaction goes on from there; a step that ran already deletes nothing more.
    assert group(Step.VISIBILITY) is None
    for run in runs:
        assert remaining_rows(run) == {}


def test_a_bad_row_in_a_group_is_charged_alone_and_the_others_go():
    runs = _runs_on_one_shard(5)
    bad = runs[2]
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION refuse_delete() RETURNS trigger AS $$ BEGIN "
            f"IF OLD.execution_id = {bad.pk} THEN RAISE EXCEPTION 'history is read-only'; END IF; "
            "RETURN OLD; END $$ LANGUAGE plpgsql"
        )
        cursor.execute(
            "CREATE TRIGGER refuse_delete BEFORE DELETE ON engine_historybatch "
            "FOR EACH ROW EXECUTE FUNCTION refuse_delete()"
        )
    try:
        lease = leases.acquire(bad.shard, "w")
        assert lease is not None
        assert retention.process(bad.shard, lease) == 4
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER refuse_delete ON engine_historybatch")
            cursor.execute("DROP FUNCTION refuse_delete()")
    row = Retention.objects.get(execution_id=bad.pk)
    assert (row.failures, row.step) == (1, Step.HISTORY)
    assert "history is read-only" in row.last_error
    for run in runs:
        if run is not bad:
            assert remaining_rows(run) == {}
