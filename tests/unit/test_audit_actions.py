"""The audit-log tests cover every audited action the code has: a new audited gRPC method, a new
`record_change(action=...)`, a new REST write or a newly implemented write method without its audit
mode fails here until its end-to-end check (tests/e2e/test_audit_actions.py,
tests/integration/test_audit_actions.py, tests/integration/test_audit_retention.py) is written."""

from __future__ import annotations

import ast
from pathlib import Path

from django.urls import URLPattern, URLResolver, get_resolver
from temporalio.api.workflowservice.v1 import service_pb2 as workflow_service

from engine.api import methods, servicer
from tenants.roles import Access
from tests.e2e import test_audit_actions as e2e
from tests.integration import test_audit_actions as rest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["tenants", "engine", "visibility", "frontend", "platform/perdura"]

RETENTION_ACTIONS = {"audit.prune"}
"""Checked by tests/integration/test_audit_retention.py (and the CLI's prune, end to end)."""

KEY_ROTATION_ACTIONS = {"namespace.rotate_key", "masterkey.rotate"}
"""Checked by tests/e2e/test_key_rotation.py (the operator CLI's entries: actor, target, details) and
tests/integration/test_console_compliance.py (a namespace admin's rotation in the console)."""

EXPORT_ACTIONS = {"export.run"}
"""Checked by tests/integration/test_run_export_rest.py (a person's REST export: actor, target, via,
outcome, the chain head) and tests/e2e/test_run_export.py (a key's export, listed in the run's next one)."""

ERASURE_ACTIONS = {"subject.erase"}
"""Checked by tests/integration/test_erasure.py (the operator's entry: actor, target, destroyed keys,
terminated runs), tests/e2e/test_erasure.py (the CLI's and a namespace admin's REST erasure) and
tests/integration/test_console_compliance.py (a namespace admin's, in the console)."""

CONSOLE_ACTIONS = {
    "PatchSchedule",
    "CreateSchedule",
    "UpdateSchedule",
    "DeleteSchedule",
    "AddSearchAttributes",
    "RemoveSearchAttributes",
}
"""Recorded by the console's schedule actions (frontend/views/schedules.py) with the person, under the gRPC
method's name; checked by tests/integration/test_console_schedules_export.py (allowed, refused, invalid);
by its schedule forms (frontend/views/schedule_forms.py), checked by tests/browser/test_console_schedule_forms.py
and tests/integration/test_console_schedule_forms.py (ok, failed, denied); and by the namespace settings page (frontend/tenant_views/settings.py), checked by
tests/integration/test_console_tenants.py (added, refused over the type's limit, removed)."""

DYNAMIC_ACTIONS = {
    # record_change passes its own argument on to record
    "tenants/audit.py": ["action"],
    # the gRPC method's name: covered by the method table (the first test)
    "engine/api/audit.py": ["method"],
    # `<HTTP method> <view>` of a refused or failed REST write: covered by REST_WRITES (the third test)
    "tenants/rest/views.py": ["f'{self.request.method} {type(self).__name__}'"],
    # a console action's gRPC method name: tests/unit/test_console_actions.py checks each is an audited
    # CALL row; tests/browser/test_console_actions.py checks the entries
    "frontend/views/actions.py": ["method"],
    # StartBatchOperation / StopBatchOperation, audited CALL rows of the method table;
    # tests/integration/test_console_batches.py checks the console's entries
    "frontend/views/batches.py": ["method"],
}
"""The only places that record an action whose name is not a literal, and what covers them."""

WORKER_CALLS = {
    "PollWorkflowTaskQueue",
    "RespondWorkflowTaskCompleted",
    "RespondWorkflowTaskFailed",
    "PollActivityTaskQueue",
    "RecordActivityTaskHeartbeat",
    "RecordActivityTaskHeartbeatById",
    "RespondActivityTaskCompleted",
    "RespondActivityTaskCompletedById",
    "RespondActivityTaskFailed",
    "RespondActivityTaskFailedById",
    "RespondActivityTaskCanceled",
    "RespondActivityTaskCanceledById",
    "RespondQueryTaskCompleted",
    "ResetStickyTaskQueue",
    "ShutdownWorker",
    "GetSearchAttributes",  # ADMIN because it lists every namespace's attributes; a read
}
"""Implemented methods that need more than READ but are not audited: a worker's progress on work
already admitted (README, Audit log: not recorded), and one read."""

ALWAYS_REFUSED = {"UpdateWorkerBuildIdCompatibility", "UpdateWorkerVersioningRules", "SetCurrentDeployment"}
"""Writes served only to refuse them, as the real dev server does by default: they change nothing
(engine/api/rpc/legacy_versioning.py; tests/e2e/test_system_info.py checks every answer)."""


def _recorded_actions() -> tuple[set[str], dict[str, list[str]]]:
    """Literal `action=` arguments of every `record(...)`/`record_change(...)` call in the product, and
    the files of calls whose action is not a literal (with the expression)."""
    literal: set[str] = set()
    dynamic: dict[str, list[str]] = {}
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.Call):
                    continue
                name = (
                    node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                )
                if name not in ("record", "record_change"):
                    continue
                for keyword in node.keywords:
                    if keyword.arg != "action":
                        continue
                    if isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, str):
                        literal.add(keyword.value.value)
                    else:
                        relative = str(path.relative_to(ROOT))
                        dynamic.setdefault(relative, []).append(ast.unparse(keyword.value))
    return literal, dynamic


def test_every_audited_grpc_method_is_performed_end_to_end():
    audited = {
        name
        for table in (methods.WORKFLOW_METHODS, methods.OPERATOR_METHODS)
        for name, rule in table.items()
        if rule.audit is not methods.Audit.NONE
    }
    assert audited == e2e.AUDITED
    missing = sorted(audited - set(e2e.CALLED))
    assert not missing, f"perform these audited methods in tests/e2e/test_audit_actions.py: {missing}"
    stale = sorted(set(e2e.CALLED) - audited)
    assert not stale, f"these methods are no longer audited: {stale}"
    # A CHANGE method's success is its service's entry; a CALL's, the method's own.
    for name, action in e2e.CALLED.items():
        rule = methods.WORKFLOW_METHODS.get(name) or methods.OPERATOR_METHODS[name]
        assert (action == name) is (rule.audit is methods.Audit.CALL), name


def test_every_recorded_action_of_the_code_is_checked():
    literal, dynamic = _recorded_actions()
    grpc_changes = {action for name, action in e2e.CALLED.items() if action != name}
    covered = (
        rest.COVERED_ACTIONS
        | e2e.CLI_ACTIONS
        | grpc_changes
        | RETENTION_ACTIONS
        | EXPORT_ACTIONS
        | KEY_ROTATION_ACTIONS
        | ERASURE_ACTIONS
        | CONSOLE_ACTIONS
    )
    missing = sorted(literal - covered)
    assert not missing, f"check the entries of these actions end to end: {missing}"
    stale = sorted(covered - literal)
    assert not stale, f"no code records these actions any more: {stale}"
    assert dynamic == DYNAMIC_ACTIONS


def test_every_rest_write_is_checked_or_declared_unaudited():
    writes = set()

    def walk(patterns):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns)
            elif isinstance(pattern, URLPattern):
                view = getattr(pattern.callback, "view_class", None) or getattr(pattern.callback, "cls", None)
                if view is not None and view.__module__.startswith("tenants.rest."):
                    writes.update((view.__name__, m) for m in getattr(view, "needs", {}) if m != "GET")

    walk(get_resolver().url_patterns)
    assert writes == set(rest.REST_WRITES) | rest.NOT_AUDITED_REST_WRITES
    assert not set(rest.REST_WRITES) & rest.NOT_AUDITED_REST_WRITES
    for check in rest.REST_WRITES.values():
        assert callable(getattr(rest, check, None)), check


def test_every_implemented_write_method_is_audited_unless_a_worker_call():
    """Implementing, say, StartBatchOperation (a write today answering UNIMPLEMENTED) without giving it
    an audit mode in engine/api/methods.py fails here."""
    service = workflow_service.DESCRIPTOR.services_by_name["WorkflowService"]
    implemented = {
        m.name
        for m in service.methods
        if "_unimplemented"
        not in getattr(getattr(servicer.WorkflowService, m.name, None), "__qualname__", "")
    }
    unaudited_writes = {
        name
        for name in implemented
        if methods.WORKFLOW_METHODS[name].access is not Access.READ
        and methods.WORKFLOW_METHODS[name].audit is methods.Audit.NONE
    }
    assert unaudited_writes == WORKER_CALLS | ALWAYS_REFUSED
    for name, rule in methods.OPERATOR_METHODS.items():
        handler = getattr(servicer.OperatorService, name, None)
        if rule.access is not Access.READ and "_unimplemented" not in getattr(handler, "__qualname__", ""):
            assert rule.audit is not methods.Audit.NONE, name
