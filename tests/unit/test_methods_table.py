"""The per-RPC access table (engine/api/methods.py) covers every method, and `decide` applies it."""

from __future__ import annotations

import pytest
from temporalio.api.operatorservice.v1 import request_response_pb2 as orr
from temporalio.api.operatorservice.v1 import service_pb2 as operator_service
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.api.workflowservice.v1 import service_pb2 as workflow_service

from engine import tokens
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
        "ListArchivedWorkflowExecutions",
        "ListSchedules",
        "CountSchedules",
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
    """A key of `org` on `names`; a namespace `x.acme` has the id `id-x`."""
    grants = frozenset((name, f"id-{name.partition('.')[0]}") for name in names)
    return Principal(
        anonymous=False,
        key_id="k",
        key_name="ci",
        prefix="abcdefghijkl",
        organization_id="o",
        organization_slug=org,
        role=role,
        namespaces=frozenset(names),
        namespace_ids=frozenset({"id-a"} | {i for _, i in grants}),
        grants=grants,
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


# --- targets: every field that can name a namespace is declared and checked ----------------------

STRING_KINDS = {9, 12}  # FieldDescriptor TYPE_STRING, TYPE_BYTES


def looks_like_a_target(field) -> bool:
    """A field that can name a namespace or what a call acts on: a namespace name or id, the id of a
    namespace request, or a token (task tokens embed their namespace; other tokens must be shown inert)."""
    if field.type not in STRING_KINDS:
        return False
    name = field.name
    owner = field.containing_type.full_name
    return (
        name in ("namespace", "namespace_id")
        or name.endswith(("_namespace", "token"))
        or (name == "id" and "Namespace" in owner)
    )


def candidate_fields(message, prefix: str = "", seen: frozenset[str] = frozenset()):
    """(path, field) of every target-like field of `message`, at any depth, nested requests included."""
    for field in message.fields:
        path = f"{prefix}{field.name}{'[]' if field.is_repeated else ''}"
        if looks_like_a_target(field):
            yield path, field
        nested = field.message_type
        if nested is None or nested.GetOptions().map_entry or nested.full_name in seen:
            continue
        if nested.full_name.startswith("google.protobuf."):
            continue
        yield from candidate_fields(nested, f"{path}.", seen | {message.full_name})


ALL_METHODS = [(service, method, table) for service, table in SERVICES for method in service.methods]


@pytest.mark.parametrize(
    ("service", "method", "table"), ALL_METHODS, ids=[f"{s.name}.{m.name}" for s, m, _ in ALL_METHODS]
)
def test_every_field_that_can_name_a_target_is_declared(service, method, table):
    """A field of a request that names a namespace (at any depth: inner requests, commands, tokens) is
    either a target of the method's row, which the interceptor checks, or listed as inert with a reason.
    A new method or a new SDK release adding such a field fails here until someone decides which."""
    rule = table[method.name]
    if rule.scope is methods.Scope.SYSTEM:
        return  # closed to keys: nothing in the request is ever authorised
    declared = {t.path for t in rule.targets}
    undeclared = [
        f"{path} ({field.containing_type.full_name}.{field.name})"
        for path, field in candidate_fields(method.input_type)
        if path not in declared
        and (field.containing_type.full_name, field.name) not in methods.INERT
        and field.name != methods.PAGE_TOKEN
    ]
    assert not undeclared, (
        f"{service.name}.{method.name} has fields that can name a namespace or target, neither declared as "
        f"targets of its row in engine/api/methods.py nor listed in methods.INERT: {undeclared}"
    )
    fields = dict(candidate_fields(method.input_type))
    for target in rule.targets:
        assert target.path in fields, f"{method.name}: target {target.path} is no field of its request"


def test_every_inert_entry_is_still_a_field():
    found = {
        (field.containing_type.full_name, field.name)
        for _, method, _ in ALL_METHODS
        for _, field in candidate_fields(method.input_type)
    }
    assert not set(methods.INERT) - found


def test_the_multi_field_methods_declare_the_fields_their_handlers_act_on():
    table = methods.WORKFLOW_METHODS
    paths = {name: {t.path for t in rule.targets} for name, rule in table.items()}
    assert paths["DescribeNamespace"] == {"namespace", "id"}
    assert methods.OPERATOR_METHODS["DeleteNamespace"].targets[-1].path == "namespace_id"
    assert {"operations[].start_workflow.namespace", "operations[].update_workflow.namespace"} <= paths[
        "ExecuteMultiOperation"
    ]
    for name in [
        "RespondWorkflowTaskCompleted",
        "RespondWorkflowTaskFailed",
        "RecordActivityTaskHeartbeat",
        "RespondActivityTaskCompleted",
        "RespondActivityTaskFailed",
        "RespondActivityTaskCanceled",
        "RespondQueryTaskCompleted",
    ]:
        assert "task_token" in paths[name], name


def token_of(namespace_id: str) -> bytes:
    return tokens.encode(tokens.TaskToken(namespace_id, "wf", "run", 1, 1))


TWO = key("reader", "a.acme", "b.acme")
"""A key covering two namespaces: fields may each be covered and still disagree."""


@pytest.mark.parametrize(
    ("method", "request_", "principal", "expected"),
    [
        # The issue's hole: the caller's namespace in `namespace`, another's in `id`.
        (
            "DescribeNamespace",
            rr.DescribeNamespaceRequest(namespace="a.acme", id="id-z"),
            key("reader", "a.acme"),
            PermissionDenied,
        ),
        (
            "DescribeNamespace",
            rr.DescribeNamespaceRequest(namespace="a.acme", id="id-b"),
            TWO,
            InvalidArgument,
        ),
        ("DescribeNamespace", rr.DescribeNamespaceRequest(namespace="a.acme", id="id-a"), TWO, None),
        (
            "DescribeNamespace",
            rr.DescribeNamespaceRequest(id="id-z"),
            key("reader", "a.acme"),
            PermissionDenied,
        ),
        ("DescribeNamespace", rr.DescribeNamespaceRequest(), key("reader", "a.acme"), InvalidArgument),
        # A task token of another namespace than the request's.
        (
            "RespondActivityTaskCompleted",
            rr.RespondActivityTaskCompletedRequest(namespace="a.acme", task_token=token_of("id-z")),
            key("operator", "a.acme"),
            PermissionDenied,
        ),
        (
            "RespondActivityTaskCompleted",
            rr.RespondActivityTaskCompletedRequest(namespace="a.acme", task_token=token_of("id-b")),
            key("operator", "a.acme", "b.acme"),
            InvalidArgument,
        ),
        (
            "RespondActivityTaskCompleted",
            rr.RespondActivityTaskCompletedRequest(namespace="a.acme", task_token=token_of("id-a")),
            key("operator", "a.acme"),
            None,
        ),
        # A token this server did not issue is left to the handler, which refuses it.
        (
            "RespondWorkflowTaskFailed",
            rr.RespondWorkflowTaskFailedRequest(namespace="a.acme", task_token=b"garbage"),
            key("operator", "a.acme"),
            None,
        ),
    ],
)
def test_every_target_field_is_authorised(method, request_, principal, expected):
    denial = decide(method, rule(method), principal, request_)
    if expected is None:
        assert denial is None
    else:
        assert isinstance(denial, expected), denial


def multi(outer: str, start: str, update: str) -> rr.ExecuteMultiOperationRequest:
    op = rr.ExecuteMultiOperationRequest.Operation
    return rr.ExecuteMultiOperationRequest(
        namespace=outer,
        operations=[
            op(start_workflow=rr.StartWorkflowExecutionRequest(namespace=start, workflow_id="w")),
            op(update_workflow=rr.UpdateWorkflowExecutionRequest(namespace=update)),
        ],
    )


def test_inner_requests_are_authorised():
    method = "ExecuteMultiOperation"
    operator = key("operator", "a.acme")
    assert decide(method, rule(method), operator, multi("a.acme", "a.acme", "a.acme")) is None
    assert decide(method, rule(method), operator, multi("a.acme", "", "")) is None
    for inner in [multi("a.acme", "z.other", "a.acme"), multi("a.acme", "a.acme", "default")]:
        denial = decide(method, rule(method), operator, inner)
        assert isinstance(denial, PermissionDenied), denial
        assert "request field operations[]." in denial.message
    both = key("operator", "a.acme", "b.acme")
    denial = decide(method, rule(method), both, multi("a.acme", "b.acme", "b.acme"))
    assert isinstance(denial, InvalidArgument)
    assert "names two namespaces" in denial.message


def test_commands_may_only_name_namespaces_the_key_covers():
    """A child or external workflow in a namespace the key does not cover is refused before the rules
    see it; one it covers is left to the rules (which refuse commands across namespaces for now)."""
    from temporalio.api.command.v1 import Command, StartChildWorkflowExecutionCommandAttributes

    def completed(child_namespace: str) -> rr.RespondWorkflowTaskCompletedRequest:
        attrs = StartChildWorkflowExecutionCommandAttributes(namespace=child_namespace, workflow_id="c")
        return rr.RespondWorkflowTaskCompletedRequest(
            namespace="a.acme",
            task_token=token_of("id-a"),
            commands=[Command(start_child_workflow_execution_command_attributes=attrs)],
        )

    method = "RespondWorkflowTaskCompleted"
    assert decide(method, rule(method), key("operator", "a.acme"), completed("a.acme")) is None
    denial = decide(method, rule(method), key("operator", "a.acme"), completed("z.other"))
    assert isinstance(denial, PermissionDenied)
    assert decide(method, rule(method), key("operator", "a.acme", "b.acme"), completed("b.acme")) is None


def test_delete_namespace_by_id_is_authorised_on_the_id():
    delete = methods.OPERATOR_METHODS["DeleteNamespace"]
    admin = key("admin", "a.acme")
    assert decide("DeleteNamespace", delete, admin, orr.DeleteNamespaceRequest(namespace_id="id-a")) is None
    denial = decide("DeleteNamespace", delete, admin, orr.DeleteNamespaceRequest(namespace_id="id-z"))
    assert isinstance(denial, PermissionDenied)
    denial = decide(
        "DeleteNamespace", delete, admin, orr.DeleteNamespaceRequest(namespace="a.acme", namespace_id="id-z")
    )
    assert isinstance(denial, PermissionDenied)
