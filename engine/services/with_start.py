"""Starts that carry a message: signal-with-start, and update-with-start (ExecuteMultiOperation)."""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.api.common.v1 import Header, Payloads
from temporalio.api.enums.v1 import WorkflowIdConflictPolicy
from temporalio.api.update.v1 import Request as UpdateRequest
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest, UpdateWorkflowExecutionRequest

from engine.errors import EngineError, InvalidArgument, NotFound
from engine.history import lifecycle
from engine.history import updates as update_rules
from engine.history.mutation import Mutation
from engine.models import Execution
from engine.services import updates, workflows
from tenants.models import Namespace


def workflow_signal_with_start(
    *,
    namespace: Namespace,
    start: StartWorkflowExecutionRequest,
    signal_name: str,
    input: Payloads | None,
    header: Header | None,
) -> workflows.StartResult:
    """Signal the running run of the start's workflow id, or start one (under the start's policies) and
    signal it in the same transaction, right after its start event.

    Raises:
        AlreadyExists: the id is taken under the start's policies.
        InvalidArgument: an inconsistent policy combination.
    """

    def signal(m: Mutation) -> None:
        lifecycle.signal(
            m, signal_name=signal_name, input=input, identity=start.identity, request_id="", header=header
        )

    def signal_running(execution: Execution) -> None:
        workflows.signal_locked(execution, signal)

    return workflows.workflow_start(
        namespace=namespace, request=start, on_running=signal_running, signal=signal
    )


class OperationFailed(Exception):
    """One operation of an update-with-start failed; the other is reported aborted."""

    def __init__(self, error: EngineError, *, index: int) -> None:
        super().__init__(error.message)
        self.error = error
        self.index = index
        """0 for the start, 1 for the update."""


@dataclass(frozen=True, slots=True)
class UpdateWithStart:
    run_id: str
    started: bool
    status: updates.UpdateStatus
    attached: bool
    """The update id was already known to the current run: no start was attempted."""


def update_with_start_check(
    *, start: StartWorkflowExecutionRequest, update: UpdateWorkflowExecutionRequest
) -> None:
    """The rules an update-with-start adds to those of its start and its update.

    Raises:
        InvalidArgument: the update names another workflow id, or the start a cron schedule or a delay.
    """
    if update.workflow_execution.workflow_id and update.workflow_execution.workflow_id != start.workflow_id:
        raise InvalidArgument("the update must target the workflow id the start names")
    if start.cron_schedule or start.HasField("workflow_start_delay"):
        raise InvalidArgument("update-with-start cannot use a cron schedule or a start delay")


def workflow_update_with_start(
    *, namespace: Namespace, start: StartWorkflowExecutionRequest, update: UpdateRequest
) -> UpdateWithStart:
    """Attach to the update if the current run already knows its id (even a closed run, whatever the
    start's policies say); otherwise start the run, or join the running one under USE_EXISTING, and admit
    the update in the start's own transaction.

    Raises:
        OperationFailed: the start (index 0) or the update (index 1) failed, with its error.
    """
    update_id = update.meta.update_id
    try:
        existing = updates.update_status(
            namespace=namespace,
            workflow_id=start.workflow_id,
            run_id="",
            update_id=update_id,
            include_ended=True,
        )
    except NotFound:
        existing = None
    if existing is not None and not existing.ended_by_close:
        return UpdateWithStart(run_id=existing.run_id, started=False, status=existing, attached=True)

    def admit_new(m: Mutation) -> None:
        update_rules.admit(m, update)

    def admit_running(execution: Execution) -> None:
        workflows.signal_locked(execution, admit_new)

    use_existing = (
        start.workflow_id_conflict_policy == WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
    )
    try:
        started = workflows.workflow_start(
            namespace=namespace,
            request=start,
            on_running=admit_running if use_existing else None,
            signal=admit_new,
        )
    except EngineError as e:
        raise OperationFailed(e, index=0) from None
    try:
        status = updates.update_status(
            namespace=namespace, workflow_id=start.workflow_id, run_id=started.run_id, update_id=update_id
        )
    except EngineError as e:
        raise OperationFailed(e, index=1) from None
    return UpdateWithStart(run_id=started.run_id, started=started.started, status=status, attached=False)
