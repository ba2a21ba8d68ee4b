"""The per-RPC access table (engine/api/methods.py) covers every method, and `decide` applies it."""

from __future__ import annotations

import pytest
from temporalio.api.operatorservice.v1 import request_response_pb2 as orr
from temporalio.api.operatorservice.v1 import service_pb2 as operator_service
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.api.workflowservice.v1 import service_pb2 as workflow_service

from engine.api import methods
from engine.api.auth import decide
from engine.errors import InvalidArgument, PermissionDenied
from tenants.auth import ANONYMOUS, Principal
from tenants.quotas import Bucket
from tenants.roles import Access

SERVICES = [
    (workflow_service.DESCRIPTOR.services_by_name["WorkflowService"], methods.WORKFLOW_METHODS),
    (operator_service.DESCRIPTOR.services_by_name["OperatorService"], methods.OPERATOR_METHODS),
]


@pytest.mark.parametrize(("service", "table"), SERVICES, ids=["WorkflowService", "OperatorService"])
def test_every_method_of_the_service_descriptor_has_a_rule(service, table):
    missing = [m.name for m in service.methods if m.name not in table]
    assert not missing, f"add these {service.name} methods to engine/api/methods.py: {missing}"
    stale = sorted(set(table) - {m.name for m in service.methods})
    assert not stale, f"these rows name no {service.name} method: {stale}"


@pytest.mark.parametrize(("service", "table"), SERVICES, ids=["WorkflowService", "OperatorService"])
def test_namespace_scoped_rules_have_a_namespace_field_to_read(service, table):
    for method in service.methods:
        rule = table[method.name]
        has_field = "namespace" in method.input_type.fields_by_name
        if rule.scope in (methods.Scope.NAMESPACE, methods.Scope.REGISTER):
            assert has_field, method.name


@pytest.mark.parametrize(("service", "table"), SERVICES, ids=["WorkflowService", "OperatorService"])
def test_every_method_draws_from_a_rate_limit_bucket_or_declares_none(service, table):
    unclassified = [m.name for m in service.methods if not isinstance(table[m.name].bucket, Bucket)]
    assert not unclassified, (
        f"give these {service.name} methods a bucket in engine/api/methods.py: {unclassified}"
    )


def test_the_buckets_of_the_issue():
    """Starts and signals are actions, worker polls are polls, list/count are visibility; a limited
    bucket is only ever drawn from by a call that names its namespace."""
    table = methods.WORKFLOW_METHODS
    for name in [
        "StartWorkflowExecution",
        "SignalWorkflowExecution",
        "SignalWithStartWorkflowExecution",
        "ExecuteMultiOperation",
        "UpdateWorkflowExecution",
    ]:
        assert table[name].bucket is Bucket.ACTIONS, name
    for name in ["PollWorkflowTaskQueue", "PollActivityTaskQueue", "PollNexusTaskQueue"]:
        assert table[name].bucket is Bucket.POLLS, name
    for name in [
        "ListWorkflowExecutions",
        "CountWorkflowExecutions",
        "ScanWorkflowExecutions",
        "ListOpenWorkflowExecutions",
        "ListClosedWorkflowExecutions",
        "ListSchedules",
    ]:
        assert table[name].bucket is Bucket.VISIBILITY, name
    # Progress of work already admitted is never throttled: completions, heartbeats, history reads.
    for name in [
        "RespondWorkflowTaskCompleted",
        "RespondActivityTaskCompleted",
        "RecordActivityTaskHeartbeat",
        "GetWorkflowExecutionHistory",
        "DescribeNamespace",
    ]:
        assert table[name].bucket is Bucket.NONE, name
    for table in (methods.WORKFLOW_METHODS, methods.OPERATOR_METHODS):
        for name, rule in table.items():
            if rule.bucket is not Bucket.NONE:
                assert rule.scope is methods.Scope.NAMESPACE, name


def test_rules_are_found_by_full_method_path():
    path = f"/{methods.WORKFLOW_SERVICE}/SignalWorkflowExecution"
    assert methods.guarded(path)
    assert methods.rule_for(path) == methods.Rule(
        methods.Scope.NAMESPACE, Access.WRITE, Bucket.ACTIONS, methods.Audit.CALL
    )
    assert methods.rule_for(f"/{methods.OPERATOR_SERVICE}/AddSearchAttributes").access is Access.ADMIN
    assert not methods.guarded("/grpc.health.v1.Health/Check")
    assert methods.rule_for(f"/{methods.WORKFLOW_SERVICE}/NoSuchMethod") is None


def test_the_roles_of_the_issue():
    """reader: list, describe, history, query; operator: start, signal, cancel, terminate, reset, update
    and the worker calls; admin: namespace settings and search attributes."""
    table = methods.WORKFLOW_METHODS
    for name in [
        "ListWorkflowExecutions",
        "DescribeWorkflowExecution",
        "GetWorkflowExecutionHistory",
        "QueryWorkflow",
        "DescribeNamespace",
    ]:
        assert table[name].access is Access.READ, name
    for name in [
        "StartWorkflowExecution",
        "SignalWorkflowExecution",
        "RequestCancelWorkflowExecution",
        "TerminateWorkflowExecution",
        "ResetWorkflowExecution",
        "UpdateWorkflowExecution",
        "PollWorkflowTaskQueue",
        "RespondWorkflowTaskCompleted",
        "PollActivityTaskQueue",
        "RespondActivityTaskCompleted",
    ]:
        assert table[name].access is Access.WRITE, name
    for name in ["UpdateNamespace", "DeprecateNamespace", "RegisterNamespace"]:
        assert table[name].access is Access.ADMIN, name
    for name in ["AddSearchAttributes", "RemoveSearchAttributes", "DeleteNamespace"]:
        assert methods.OPERATOR_METHODS[name].access is Access.ADMIN, name


def key(role: str, *names: str, org: str = "acme") -> Principal:
    return Principal(
        anonymous=False,
        key_id="k",
        key_name="ci",
        prefix="abcdefghijkl",
        organization_id="o",
        organization_slug=org,
        role=role,
        namespaces=frozenset(names),
        namespace_ids=frozenset({"id-a"}),
    )


def rule(name: str) -> methods.Rule:
    return methods.WORKFLOW_METHODS[name]


def test_anonymous_may_do_anything():
    assert (
        decide(
            "TerminateWorkflowExecution",
            rule("TerminateWorkflowExecution"),
            ANONYMOUS,
            rr.TerminateWorkflowExecutionRequest(namespace="x"),
        )
        is None
    )
    assert decide("X", None, ANONYMOUS, None) is None


def test_a_key_is_denied_namespaces_it_does_not_name():
    denial = decide(
        "DescribeWorkflowExecution",
        rule("DescribeWorkflowExecution"),
        key("admin", "a.acme"),
        rr.DescribeWorkflowExecutionRequest(namespace="b.other"),
    )
    assert isinstance(denial, PermissionDenied)
    assert "no access to namespace 'b.other'" in denial.message
    assert "pdk_abcdefghijkl" in denial.message


@pytest.mark.parametrize(
    ("role", "method", "allowed"),
    [
        ("reader", "DescribeWorkflowExecution", True),
        ("reader", "QueryWorkflow", True),
        ("reader", "SignalWorkflowExecution", False),
        ("reader", "TerminateWorkflowExecution", False),
        ("reader", "PollWorkflowTaskQueue", False),
        ("operator", "SignalWorkflowExecution", True),
        ("operator", "PollActivityTaskQueue", True),
        ("operator", "UpdateNamespace", False),
        ("admin", "UpdateNamespace", True),
        ("admin", "TerminateWorkflowExecution", True),
    ],
)
def test_roles_on_a_granted_namespace(role, method, allowed):
    request = getattr(rr, f"{method}Request")(namespace="a.acme")
    denial = decide(method, rule(method), key(role, "a.acme"), request)
    assert (denial is None) is allowed
    if not allowed:
        assert isinstance(denial, PermissionDenied)
        assert f"is a {role} key" in denial.message


def test_describe_namespace_by_id_checks_the_id():
    assert (
        decide(
            "DescribeNamespace",
            rule("DescribeNamespace"),
            key("reader", "a.acme"),
            rr.DescribeNamespaceRequest(id="id-a"),
        )
        is None
    )
    denial = decide(
        "DescribeNamespace",
        rule("DescribeNamespace"),
        key("reader", "a.acme"),
        rr.DescribeNamespaceRequest(id="id-b"),
    )
    assert isinstance(denial, PermissionDenied)


def test_a_key_must_name_a_namespace():
    denial = decide(
        "StartWorkflowExecution",
        rule("StartWorkflowExecution"),
        key("admin", "a.acme"),
        rr.StartWorkflowExecutionRequest(),
    )
    assert isinstance(denial, InvalidArgument)


def test_register_needs_an_admin_key_and_the_organisation_suffix():
    register = rule("RegisterNamespace")
    assert (
        decide(
            "RegisterNamespace",
            register,
            key("admin", "a.acme"),
            rr.RegisterNamespaceRequest(namespace="new.acme"),
        )
        is None
    )
    other = decide(
        "RegisterNamespace",
        register,
        key("admin", "a.acme"),
        rr.RegisterNamespaceRequest(namespace="new.other"),
    )
    assert isinstance(other, PermissionDenied)
    assert "<name>.acme" in other.message
    weak = decide(
        "RegisterNamespace",
        register,
        key("operator", "a.acme"),
        rr.RegisterNamespaceRequest(namespace="new.acme"),
    )
    assert isinstance(weak, PermissionDenied)


def test_cluster_methods_need_only_a_valid_key_and_system_methods_are_closed_to_keys():
    assert decide("GetSystemInfo", rule("GetSystemInfo"), key("reader"), rr.GetSystemInfoRequest()) is None
    assert decide("ListNamespaces", rule("ListNamespaces"), key("reader"), rr.ListNamespacesRequest()) is None
    denial = decide(
        "ListClusters",
        methods.OPERATOR_METHODS["ListClusters"],
        key("admin", "a.acme"),
        orr.ListClustersRequest(),
    )
    assert isinstance(denial, PermissionDenied)
    assert isinstance(decide("Unknown", None, key("admin", "a.acme"), None), PermissionDenied)


def test_calls_spanning_every_namespace_are_closed_to_keys():
    """GetSearchAttributes lists every namespace's attributes: one tenant must not see another's."""
    denial = decide(
        "GetSearchAttributes",
        rule("GetSearchAttributes"),
        key("admin", "a.acme"),
        rr.GetSearchAttributesRequest(),
    )
    assert isinstance(denial, PermissionDenied)
