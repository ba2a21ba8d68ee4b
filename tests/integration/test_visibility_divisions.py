"""Workflow filters leave standalone activities out only in a namespace that has started one.

The condition that leaves them out names workflow_id, which most visibility indexes lack, so it costs
counts their index-only scans (bench/README.md, the console list at a million runs). A namespace that
never started a standalone activity has no host run to leave out; its first start sets the flag in the
same transaction as the host run.
"""

from __future__ import annotations

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.workflowservice.v1 import StartActivityExecutionRequest

from engine.services import standalone_activities
from tenants.models import Namespace
from tests.integration.test_rest_api import create_namespace, signup
from visibility import selectors
from visibility.query import ast

pytestmark = pytest.mark.django_db


def _start(namespace: Namespace, activity_id: str) -> None:
    request = StartActivityExecutionRequest(
        namespace=namespace.name, activity_id=activity_id, request_id=activity_id
    )
    request.activity_type.name = "charge"
    request.task_queue.name = "jobs"
    request.start_to_close_timeout.CopyFrom(Duration(seconds=30))
    standalone_activities.activity_start(namespace=namespace, request=request)


def _leaves_activities_out(where: ast.Node | None) -> bool:
    return isinstance(where, ast.StartsWith) and where.attr.name == "WorkflowId" and where.negated


def test_the_first_standalone_activity_turns_the_division_on_for_workflow_filters() -> None:
    owner, _ = signup()
    namespace = Namespace.objects.get(pk=create_namespace(owner, "orders")["id"])
    other = Namespace.objects.get(pk=create_namespace(owner, "payments")["id"])

    assert selectors.filter_parse(namespace_id=namespace.id, query="").where is None
    # Activity filters always take only the host runs.
    activities = selectors.filter_parse(namespace_id=namespace.id, query="", activities=True).where
    assert isinstance(activities, ast.StartsWith)
    assert not activities.negated

    _start(namespace, "job-1")
    assert Namespace.objects.get(pk=namespace.pk).has_standalone_activities
    assert _leaves_activities_out(selectors.filter_parse(namespace_id=namespace.id, query="").where)
    hosts, _ = selectors.activity_list(namespace_id=namespace.id, query="", page_size=10, page_token=b"")
    assert len(hosts) == 1
    runs, _ = selectors.execution_list(namespace_id=namespace.id, query="", page_size=10, page_token=b"")
    assert runs == []  # the host run is not a workflow
    assert selectors.filter_parse(namespace_id=other.id, query="").where is None  # per namespace

    _start(namespace, "job-2")  # later starts leave the flag as it is
    assert Namespace.objects.get(pk=namespace.pk).has_standalone_activities


@pytest.mark.parametrize(
    "query", ["", "GROUP BY ExecutionStatus", "ExecutionStatus = 'Running'", "ExecutionStatus != 'Running'"]
)
def test_a_count_over_the_status_alone_is_narrowed_to_workflows_without_the_flag(query: str) -> None:
    """Only with the division's condition may Postgres count in the narrow partial (namespace, status)
    index (tests/integration/test_visibility_plans.py): it changes nothing where no activity started."""
    owner, _ = signup()
    namespace = Namespace.objects.get(pk=create_namespace(owner, "orders")["id"])
    counted = selectors.filter_parse(namespace_id=namespace.id, query=query, count=True).where
    assert _leaves_activities_out(counted if query in ("", "GROUP BY ExecutionStatus") else counted.items[1])
    # A list, and a count over another attribute, keep the indexes that lack workflow_id.
    assert not _leaves_activities_out(selectors.filter_parse(namespace_id=namespace.id, query="").where)
    typed = selectors.filter_parse(namespace_id=namespace.id, query="WorkflowType = 'Refund'", count=True)
    assert isinstance(typed.where, ast.Compare)
