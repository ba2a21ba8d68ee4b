"""Hot-path rows built without the ORM's per-query work (engine/persistence/model_rows.py) must be the
instances the ORM builds: same values, same types (aware datetimes, UUIDs, bytes, booleans)."""

from __future__ import annotations

import uuid

import pytest
from django.db import models
from temporalio.api.common.v1 import WorkflowType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from engine.matching import queue
from engine.models import Execution, Task
from engine.persistence import model_rows, store
from engine.services import workflows
from tenants.services.namespaces import namespace_register

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _values(instance: models.Model) -> dict[str, object]:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


def _types(instance: models.Model) -> dict[str, type]:
    return {name: type(value) for name, value in _values(instance).items()}


def test_a_run_and_its_task_read_by_hand_equal_what_the_orm_reads():
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id="wf",
        workflow_type=WorkflowType(name="T"),
        task_queue=TaskQueue(name="tq"),
    )
    result = workflows.workflow_start(namespace=namespace, request=request)

    by_orm = Execution.objects.get(namespace=namespace, run_id=result.run_id)
    found = store.find_execution(namespace.id, "wf", result.run_id, lock=False)
    loaded = store.load_execution(by_orm.pk)
    assert loaded is not None
    for by_hand in (found, loaded):
        assert _values(by_hand) == _values(by_orm)
        assert _types(by_hand) == _types(by_orm)
        assert by_hand.start_time.tzinfo is not None
        assert not by_hand._state.adding  # a saved row: save() would update it, not insert
    assert store.load_execution(by_orm.pk + 10**6) is None

    task, _ = queue.next_task(namespace.id, [1], "tq")
    assert task is not None
    task_by_orm = Task.objects.get(pk=task.pk)
    assert _values(task) == _values(task_by_orm)
    assert _types(task) == _types(task_by_orm)


def test_columns_follow_the_models_field_order():
    assert model_rows.columns(Task, "t").split(", ")[0] == 't."id"'
    names = [c.strip('"') for c in model_rows.columns(Execution).split(", ")]
    assert names == [f.column for f in Execution._meta.concrete_fields]
