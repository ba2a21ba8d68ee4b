"""WorkflowService over gRPC: thin handlers that resolve the namespace, validate, call a service, convert."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import grpc
from perdura import clock
from temporalio.api.common.v1 import Memo, SearchAttributes, WorkflowExecution, WorkflowType
from temporalio.api.enums.v1 import (
    HistoryEventFilterType,
    QueryResultType,
    ResetReapplyType,
    TaskQueueKind,
    WorkflowExecutionStatus,
    WorkflowIdConflictPolicy,
)
from temporalio.api.errordetails.v1 import (
    MultiOperationExecutionFailure,
    NamespaceNotFoundFailure,
    QueryFailedFailure,
)
from temporalio.api.failure.v1 import MultiOperationExecutionAborted
from temporalio.api.history.v1 import History
from temporalio.api.query.v1 import QueryRejected
from temporalio.api.sdk.v1 import UserMetadata
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.update.v1 import UpdateRef
from temporalio.api.workflow.v1 import (
    PendingChildExecutionInfo,
    PendingWorkflowTaskInfo,
    WorkflowExecutionConfig,
    WorkflowExecutionInfo,
)
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.api.workflowservice.v1 import service_pb2_grpc as wss

from engine import dbthreads, notify, page_tokens, tokens, validation
from engine.api import namespaces, task_queues
from engine.api import visibility as visibility_rpc
from engine.api.convert import dur, ts
from engine.api.errors import rpc
from engine.api.pending_activities import pending_activity
from engine.errors import DeadlineExceeded, EngineError, InvalidArgument, NotFound, Unimplemented
from engine.history import activity as activity_rules
from engine.history import activity_control as activity_control_rules
from engine.history import lifecycle
from engine.history import updates as update_rules
from engine.history.mutation import TaskKind
from engine.matching import queue
from engine.persistence import store
from engine.services import activity_control as activity_control_services
from engine.services import activity_tasks, reads, schedules, workflow_tasks, workflows
from engine.services import reset as reset_service
from engine.services import updates as update_services
from engine.services import workflow_queries as queries
from tenants.models import Namespace
from tenants.selectors import namespace_by_name

SERVER_VERSION = "1.32.0"
LONG_POLL_SECONDS = 60.0
HISTORY_WAIT_SECONDS = 20.0
DEFAULT_HISTORY_PAGE = 1000
QUEUE_RECHECK_SECONDS = 5.0
QUERY_WAIT_SECONDS = 20.0
UPDATE_WAIT_SECONDS = 20.0
STICKY_QUERY_SECONDS = 5.0
RUNNING = WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING


async def _namespace(name: str) -> Namespace:
    if not name:
        raise InvalidArgument("Namespace is not set on request.")
    namespace = await dbthreads.run(namespace_by_name, name)
    if namespace is None:
        raise NotFound(f"Namespace {name} is not found.", NamespaceNotFoundFailure(namespace=name))
    return namespace


def _token(namespace: Namespace, data: bytes) -> tokens.TaskToken:
    if not data:
        raise InvalidArgument("Task token not set on request.")
    token = tokens.decode(data)
    if token.namespace_id != str(namespace.id):
        # A token from another namespace names nothing here: same answer as a stale one.
        raise InvalidArgument("Task token does not belong to this namespace.")
    return token


def _deadline(context: grpc.aio.ServicerContext, cap: float) -> float:
    remaining = context.time_remaining()
    budget = cap if remaining is None else min(cap, max(remaining - 1.0, 0.0))
    return asyncio.get_running_loop().time() + budget


async def _long_poll(context, namespace: Namespace, kind: int, task_queue: str, poll_once):  # type: ignore[no-untyped-def]
    """Claim a task now or when one arrives, until about a minute passes (then an empty answer)."""
    loop = asyncio.get_running_loop()
    deadline = _deadline(context, LONG_POLL_SECONDS)
    with notify.hub.waiter(notify.task_queue_key(namespace.id, kind, task_queue)) as waiter:
        while True:
            outcome = await dbthreads.run(poll_once)
            if not isinstance(outcome, queue.NotYet):
                return outcome
            wait = QUEUE_RECHECK_SECONDS
            if outcome.visible_at is not None:
                wait = min(max((outcome.visible_at - clock.now()).total_seconds(), 0.01), wait)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            await waiter.wait(min(remaining, wait))
            waiter.rearm()


class WorkflowService(wss.WorkflowServiceServicer):
    """The Temporal WorkflowService. Methods not defined here answer UNIMPLEMENTED."""

    # --- system and namespaces -------------------------------------------------------------

    @rpc
    async def GetSystemInfo(self, request, context):  # noqa: N802
        return rr.GetSystemInfoResponse(
            server_version=SERVER_VERSION,
            capabilities=rr.GetSystemInfoResponse.Capabilities(
                signal_and_query_header=True,
                internal_error_differentiation=True,
                activity_failure_include_heartbeat=True,
                encoded_failure_attributes=True,
                supports_schedules=True,
                build_id_based_versioning=True,
                upsert_memo=True,
                sdk_metadata=True,
                eager_workflow_start=True,
            ),
        )

    # Namespace calls live in engine/api/namespaces.py; who may make them, in engine/api/methods.py.

    @rpc
    async def RegisterNamespace(self, request, context):  # noqa: N802
        return await namespaces.register(request)

    @rpc
    async def DescribeNamespace(self, request, context):  # noqa: N802
        return await namespaces.describe(request)

    @rpc
    async def ListNamespaces(self, request, context):  # noqa: N802
        return await namespaces.list_namespaces(request)

    @rpc
    async def UpdateNamespace(self, request, context):  # noqa: N802
        return await namespaces.update(request)

    @rpc
    async def DeprecateNamespace(self, request, context):  # noqa: N802
        return await namespaces.deprecate(request)

    # --- starting and controlling runs ---------------------------------------------------------

    @rpc
    async def StartWorkflowExecution(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        workflows.require_accepting_starts(namespace=namespace)
        validation.start_request(request)
        await visibility_rpc.check_search_attributes(namespace, request.search_attributes)
        result = await dbthreads.run(workflows.workflow_start, namespace=namespace, request=request)
        response = rr.StartWorkflowExecutionResponse(run_id=result.run_id, started=result.started)
        if result.eager_workflow_task is not None:
            response.eager_workflow_task.CopyFrom(
                await _workflow_task_response(namespace, result.eager_workflow_task)
            )
        return response

    @rpc
    async def SignalWithStartWorkflowExecution(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        workflows.require_accepting_starts(namespace=namespace)
        start = rr.StartWorkflowExecutionRequest(
            namespace=request.namespace,
            workflow_id=request.workflow_id,
            workflow_type=request.workflow_type,
            task_queue=request.task_queue,
            input=request.input,
            workflow_execution_timeout=request.workflow_execution_timeout,
            workflow_run_timeout=request.workflow_run_timeout,
            workflow_task_timeout=request.workflow_task_timeout,
            identity=request.identity,
            request_id=request.request_id,
            workflow_id_reuse_policy=request.workflow_id_reuse_policy,
            workflow_id_conflict_policy=request.workflow_id_conflict_policy,
            retry_policy=request.retry_policy,
            cron_schedule=request.cron_schedule,
            memo=request.memo,
            search_attributes=request.search_attributes,
            header=request.header,
            workflow_start_delay=request.workflow_start_delay,
            user_metadata=request.user_metadata,
            priority=request.priority,
        )
        for field in (
            "input",
            "memo",
            "search_attributes",
            "header",
            "retry_policy",
            "workflow_start_delay",
            "priority",
            "workflow_execution_timeout",
            "workflow_run_timeout",
            "workflow_task_timeout",
            "user_metadata",
        ):
            if not request.HasField(field):
                start.ClearField(field)
        validation.start_request(start)
        await visibility_rpc.check_search_attributes(namespace, start.search_attributes)
        if not request.signal_name:
            raise InvalidArgument("SignalName is not set on request.")
        validation.signal_name(request.signal_name, with_start=True)
        if request.HasField("signal_input"):
            validation.blob_size(request.signal_input, "signal input")
        signal_input = request.signal_input if request.HasField("signal_input") else None
        header = request.header if request.HasField("header") else None

        def signal(m):  # type: ignore[no-untyped-def]
            lifecycle.signal(
                m,
                signal_name=request.signal_name,
                input=signal_input,
                identity=request.identity,
                request_id="",
                header=header,
            )

        def signal_running(execution):  # type: ignore[no-untyped-def]
            workflows.signal_locked(execution, signal)

        result = await dbthreads.run(
            workflows.workflow_start,
            namespace=namespace,
            request=start,
            on_running=signal_running,
            signal=signal,
        )
        return rr.SignalWithStartWorkflowExecutionResponse(run_id=result.run_id, started=result.started)

    @rpc
    async def SignalWorkflowExecution(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        validation.require_id(request.workflow_execution.workflow_id, "WorkflowId")
        validation.run_id(request.workflow_execution.run_id)
        if not request.signal_name:
            raise InvalidArgument("SignalName is not set on request.")
        validation.signal_name(request.signal_name)
        if request.HasField("input"):
            validation.blob_size(request.input, "signal input")
        await dbthreads.run(
            workflows.workflow_signal,
            namespace=namespace,
            workflow_id=request.workflow_execution.workflow_id,
            run_id=request.workflow_execution.run_id,
            signal_name=request.signal_name,
            input=request.input if request.HasField("input") else None,
            identity=request.identity,
            request_id=request.request_id,
            header=request.header if request.HasField("header") else None,
        )
        return rr.SignalWorkflowExecutionResponse()

    @rpc
    async def RequestCancelWorkflowExecution(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        validation.require_id(request.workflow_execution.workflow_id, "WorkflowId")
        validation.run_id(request.workflow_execution.run_id)
        await dbthreads.run(
            workflows.workflow_request_cancel,
            namespace=namespace,
            workflow_id=request.workflow_execution.workflow_id,
            run_id=request.workflow_execution.run_id,
            identity=request.identity,
            reason=request.reason,
            first_execution_run_id=request.first_execution_run_id,
        )
        return rr.RequestCancelWorkflowExecutionResponse()

    @rpc
    async def TerminateWorkflowExecution(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        validation.require_id(request.workflow_execution.workflow_id, "WorkflowId")
        validation.run_id(request.workflow_execution.run_id)
        if request.HasField("details"):
            validation.blob_size(request.details, "details")
        await dbthreads.run(
            workflows.workflow_terminate,
            namespace=namespace,
            workflow_id=request.workflow_execution.workflow_id,
            run_id=request.workflow_execution.run_id,
            reason=request.reason,
            details=request.details if request.HasField("details") else None,
            identity=request.identity,
            first_execution_run_id=request.first_execution_run_id,
        )
        return rr.TerminateWorkflowExecutionResponse()

    @rpc
    async def ResetWorkflowExecution(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        if not request.request_id:
            raise InvalidArgument("RequestId is not set on request.")
        if len(request.request_id) > validation.MAX_ID_LENGTH:
            raise InvalidArgument("RequestId length exceeds limit.")
        validation.require_id(request.workflow_execution.workflow_id, "WorkflowId")
        validation.run_id(request.workflow_execution.run_id)
        if request.reset_reapply_type not in ResetReapplyType.values():
            raise InvalidArgument(f"unknown reset reapply type: {request.reset_reapply_type}")
        run_id = await dbthreads.run(reset_service.workflow_reset, namespace=namespace, request=request)
        return rr.ResetWorkflowExecutionResponse(run_id=run_id)

    # --- reading runs ------------------------------------------------------------------------

    @rpc
    async def DescribeWorkflowExecution(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        validation.require_id(request.execution.workflow_id, "WorkflowId")
        validation.run_id(request.execution.run_id)
        snap = await dbthreads.run(
            reads.run_snapshot,
            namespace_id=namespace.id,
            workflow_id=request.execution.workflow_id,
            run_id=request.execution.run_id,
        )
        return _describe_execution(snap)

    @rpc
    async def GetWorkflowExecutionHistory(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        validation.require_id(request.execution.workflow_id, "WorkflowId")
        validation.run_id(request.execution.run_id)
        run_id = request.execution.run_id
        first_event_id = 1
        if request.next_page_token:
            run_id, first_event_id = page_tokens.history_decode(request.next_page_token)
        snap = await dbthreads.run(
            reads.run_snapshot,
            namespace_id=namespace.id,
            workflow_id=request.execution.workflow_id,
            run_id=run_id,
        )
        execution = snap.execution
        close_only = (
            request.history_event_filter_type == HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT
        )
        if request.wait_new_event:
            execution = await _wait_for_history(context, execution, first_event_id, close_only)

        def token(next_event_id: int) -> bytes:
            return page_tokens.history_encode(run_id=execution.run_id, next_event_id=next_event_id)

        if close_only:
            if execution.status == RUNNING:
                return rr.GetWorkflowExecutionHistoryResponse(
                    history=History(), next_page_token=token(first_event_id)
                )
            event = await dbthreads.run(reads.close_event, execution)
            return rr.GetWorkflowExecutionHistoryResponse(history=History(events=[event] if event else []))
        page_size = request.maximum_page_size or DEFAULT_HISTORY_PAGE
        events = await dbthreads.run(
            reads.history_page, execution, first_event_id=first_event_id, page_size=page_size
        )
        next_id = events[-1].event_id + 1 if events else first_event_id
        more = next_id < execution.next_event_id or (request.wait_new_event and execution.status == RUNNING)
        return rr.GetWorkflowExecutionHistoryResponse(
            history=History(events=events), next_page_token=token(next_id) if more else b""
        )

    @rpc
    async def GetWorkflowExecutionHistoryReverse(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        validation.require_id(request.execution.workflow_id, "WorkflowId")
        validation.run_id(request.execution.run_id)
        snap = await dbthreads.run(
            reads.run_snapshot,
            namespace_id=namespace.id,
            workflow_id=request.execution.workflow_id,
            run_id=request.execution.run_id,
        )
        before = snap.execution.next_event_id
        if request.next_page_token:
            before = page_tokens.reverse_decode(request.next_page_token)
        events = await dbthreads.run(
            reads.history_reverse_page,
            snap.execution,
            before_event_id=before,
            page_size=request.maximum_page_size or DEFAULT_HISTORY_PAGE,
        )
        oldest = events[-1].event_id if events else 1
        return rr.GetWorkflowExecutionHistoryReverseResponse(
            history=History(events=events), next_page_token=str(oldest).encode() if oldest > 1 else b""
        )

    @rpc
    async def DeleteWorkflowExecution(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        validation.require_id(request.workflow_execution.workflow_id, "WorkflowId")
        validation.run_id(request.workflow_execution.run_id)
        await dbthreads.run(
            workflows.workflow_delete,
            namespace=namespace,
            workflow_id=request.workflow_execution.workflow_id,
            run_id=request.workflow_execution.run_id,
        )
        return rr.DeleteWorkflowExecutionResponse()

    # --- workflow tasks ----------------------------------------------------------------------

    @rpc
    async def PollWorkflowTaskQueue(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        validation.require_task_queue(request.task_queue.name)
        task_queues.poller_seen(namespace, task_queues.WORKFLOW, request)
        request_id = str(uuid.uuid4())
        started = await _long_poll(
            context,
            namespace,
            TaskKind.WORKFLOW,
            request.task_queue.name,
            lambda: workflow_tasks.poll_once(
                namespace=namespace,
                task_queue=request.task_queue.name,
                identity=request.identity,
                request_id=request_id,
                build_id=request.worker_version_capabilities.build_id,
            ),
        )
        if started is None:
            return rr.PollWorkflowTaskQueueResponse()
        if isinstance(started, queries.StartedQuery):
            return await _query_task_response(namespace, started)
        return await _workflow_task_response(namespace, started)

    @rpc
    async def RespondWorkflowTaskCompleted(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        token = _token(namespace, request.task_token)
        validation.command_sequence(request.commands)
        for command in request.commands:
            validation.command_payloads(command)
        await visibility_rpc.check_commands(namespace, token, request)
        result = await dbthreads.run(
            workflow_tasks.workflow_task_complete, namespace=namespace, token=token, request=request
        )
        response = rr.RespondWorkflowTaskCompletedResponse(
            activity_tasks=[_activity_task_response(namespace, a) for a in result.activities],
            reset_history_event_id=result.reset_history_event_id,
        )
        if result.workflow_task is not None:
            response.workflow_task.CopyFrom(await _workflow_task_response(namespace, result.workflow_task))
        return response

    # --- queries ---------------------------------------------------------------------------------

    @rpc
    async def QueryWorkflow(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        validation.require_id(request.execution.workflow_id, "WorkflowId")
        validation.run_id(request.execution.run_id)
        if not request.query.query_type:
            raise InvalidArgument("QueryType is not set on request.")
        if request.query.HasField("query_args"):
            validation.blob_size(request.query.query_args, "query args")
        deadline = _deadline(context, QUERY_WAIT_SECONDS)
        # Held for a workflow task in flight (answered with it, so it sees what that task produces), or
        # sent to a worker as a query task at once.
        submitted = await dbthreads.run(
            queries.query_submit,
            namespace=namespace,
            workflow_id=request.execution.workflow_id,
            run_id=request.execution.run_id,
            query=request.query,
            reject_condition=request.query_reject_condition,
            wait=timedelta(seconds=max(deadline - asyncio.get_running_loop().time(), 0.0)),
        )
        if isinstance(submitted, queries.Rejected):
            return rr.QueryWorkflowResponse(query_rejected=QueryRejected(status=submitted.status))
        try:
            answer = await _wait_for_answer(submitted.query_id, namespace, deadline, submitted.task_queue)
        finally:
            await dbthreads.run(queries.query_finish, submitted.query_id)
        if answer is None:
            raise DeadlineExceeded(_query_timeout_message(submitted.task_queue))
        if answer.completed_type == QueryResultType.QUERY_RESULT_TYPE_FAILED:
            raise InvalidArgument(
                answer.error_message or answer.failure.message,
                QueryFailedFailure(failure=answer.failure)
                if answer.HasField("failure")
                else QueryFailedFailure(),
            )
        return rr.QueryWorkflowResponse(
            query_result=answer.query_result if answer.HasField("query_result") else None
        )

    @rpc
    async def RespondQueryTaskCompleted(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        token = _token(namespace, request.task_token)
        if not token.query_id:
            raise InvalidArgument("Task token is not a query task token.")
        if request.HasField("query_result"):
            validation.blob_size(request.query_result, "query result")
        await dbthreads.run(
            queries.query_answer, namespace=namespace, query_id=token.query_id, answer=request
        )
        return rr.RespondQueryTaskCompletedResponse()

    # --- updates ---------------------------------------------------------------------------------

    @rpc
    async def UpdateWorkflowExecution(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        _validate_update(request)
        status = await dbthreads.run(
            update_services.update_admit,
            namespace=namespace,
            workflow_id=request.workflow_execution.workflow_id,
            run_id=request.workflow_execution.run_id,
            request=request.request,
            first_execution_run_id=request.first_execution_run_id,
        )
        return await _update_response(
            context, namespace, request.request.meta.update_id, status, request.wait_policy
        )

    @rpc
    async def PollWorkflowExecutionUpdate(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        validation.require_id(request.update_ref.workflow_execution.workflow_id, "WorkflowId")
        validation.run_id(request.update_ref.workflow_execution.run_id)
        if not request.update_ref.update_id:
            raise InvalidArgument("UpdateId is not set on request.")
        status = await dbthreads.run(
            update_services.update_status,
            namespace=namespace,
            workflow_id=request.update_ref.workflow_execution.workflow_id,
            run_id=request.update_ref.workflow_execution.run_id,
            update_id=request.update_ref.update_id,
        )
        response = await _update_response(
            context, namespace, request.update_ref.update_id, status, request.wait_policy, default_stage=0
        )
        return rr.PollWorkflowExecutionUpdateResponse(
            outcome=response.outcome if response.HasField("outcome") else None,
            stage=response.stage,
            update_ref=response.update_ref,
        )

    @rpc
    async def ExecuteMultiOperation(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        ops = request.operations
        if len(ops) != 2 or not ops[0].HasField("start_workflow") or not ops[1].HasField("update_workflow"):
            raise InvalidArgument(
                "ExecuteMultiOperation takes exactly a StartWorkflow then an UpdateWorkflow operation."
            )
        start, update = ops[0].start_workflow, ops[1].update_workflow
        try:
            # Temporal lets update-with-start into a deprecated namespace (and so starts a run there);
            # a deprecated namespace takes no new run from any call here.
            workflows.require_accepting_starts(namespace=namespace)
        except EngineError as e:
            raise _multi_operation_error(e, failed=0) from None
        # The handler acts on the request's namespace only: an operation naming another is refused, as
        # Temporal refuses it (the interceptor has already refused it to a key whose namespaces differ).
        for index, op_namespace in enumerate((start.namespace, update.namespace)):
            if op_namespace and op_namespace != request.namespace:
                raise _multi_operation_error(
                    InvalidArgument("Operation namespace did not match request's namespace."), failed=index
                )
        try:
            validation.start_request(start)
            await visibility_rpc.check_search_attributes(namespace, start.search_attributes)
            _validate_update(update)
            if (
                update.workflow_execution.workflow_id
                and update.workflow_execution.workflow_id != start.workflow_id
            ):
                raise InvalidArgument("the update must target the workflow id the start names")
            if start.cron_schedule or start.HasField("workflow_start_delay"):
                raise InvalidArgument("update-with-start cannot use a cron schedule or a start delay")
        except EngineError as e:
            raise _multi_operation_error(e, failed=0) from None

        # An update with this id already known to the current run (even a closed one) is attached to,
        # whatever the start's policies say: the caller gets that update's result, no new run starts.
        try:
            existing = await dbthreads.run(
                update_services.update_status,
                namespace=namespace,
                workflow_id=start.workflow_id,
                run_id="",
                update_id=update.request.meta.update_id,
                include_ended=True,
            )
        except NotFound:
            existing = None
        if existing is not None and not existing.ended_by_close:
            update_response = await _update_response(
                context, namespace, update.request.meta.update_id, existing, update.wait_policy
            )
            return rr.ExecuteMultiOperationResponse(
                responses=[
                    rr.ExecuteMultiOperationResponse.Response(
                        start_workflow=rr.StartWorkflowExecutionResponse(
                            run_id=existing.run_id, started=False
                        )
                    ),
                    rr.ExecuteMultiOperationResponse.Response(update_workflow=update_response),
                ]
            )

        def admit_new(m):  # type: ignore[no-untyped-def]
            update_rules.admit(m, update.request)

        def admit_running(execution):  # type: ignore[no-untyped-def]
            workflows.signal_locked(execution, admit_new)

        use_existing = (
            start.workflow_id_conflict_policy
            == WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
        )
        try:
            # The update is admitted in the start's own transaction, whether it starts a run or joins one.
            started = await dbthreads.run(
                workflows.workflow_start,
                namespace=namespace,
                request=start,
                on_running=admit_running if use_existing else None,
                signal=admit_new,
            )
        except EngineError as e:
            raise _multi_operation_error(e, failed=0) from None
        try:
            status = await dbthreads.run(
                update_services.update_status,
                namespace=namespace,
                workflow_id=start.workflow_id,
                run_id=started.run_id,
                update_id=update.request.meta.update_id,
            )
            update_response = await _update_response(
                context, namespace, update.request.meta.update_id, status, update.wait_policy
            )
        except EngineError as e:
            raise _multi_operation_error(e, failed=1) from None
        return rr.ExecuteMultiOperationResponse(
            responses=[
                rr.ExecuteMultiOperationResponse.Response(
                    start_workflow=rr.StartWorkflowExecutionResponse(
                        run_id=started.run_id, started=started.started
                    )
                ),
                rr.ExecuteMultiOperationResponse.Response(update_workflow=update_response),
            ]
        )

    @rpc
    async def ResetStickyTaskQueue(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        validation.require_id(request.execution.workflow_id, "WorkflowId")
        validation.run_id(request.execution.run_id)
        await dbthreads.run(
            workflow_tasks.sticky_reset,
            namespace=namespace,
            workflow_id=request.execution.workflow_id,
            run_id=request.execution.run_id,
        )
        return rr.ResetStickyTaskQueueResponse()

    @rpc
    async def RespondWorkflowTaskFailed(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        token = _token(namespace, request.task_token)
        await dbthreads.run(
            workflow_tasks.workflow_task_fail,
            namespace=namespace,
            token=token,
            cause=request.cause,
            failure=request.failure if request.HasField("failure") else None,
            identity=request.identity,
            binary_checksum=request.binary_checksum,
        )
        return rr.RespondWorkflowTaskFailedResponse()

    # --- activity tasks ----------------------------------------------------------------------

    @rpc
    async def PollActivityTaskQueue(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        validation.require_task_queue(request.task_queue.name)
        task_queues.poller_seen(namespace, task_queues.ACTIVITY, request)
        request_id = str(uuid.uuid4())
        started = await _long_poll(
            context,
            namespace,
            TaskKind.ACTIVITY,
            request.task_queue.name,
            lambda: activity_tasks.poll_once(
                namespace=namespace,
                task_queue=request.task_queue.name,
                identity=request.identity,
                request_id=request_id,
            ),
        )
        if started is None:
            return rr.PollActivityTaskQueueResponse()
        return _activity_task_response(namespace, started)

    # Activity outcomes arrive by task token (from the worker) or by ids (async completion from elsewhere);
    # both resolve to a token and share one handler per outcome.

    @rpc
    async def RecordActivityTaskHeartbeat(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        answer = await _heartbeat(namespace, _token(namespace, request.task_token), request)
        return rr.RecordActivityTaskHeartbeatResponse(
            cancel_requested=answer.cancel_requested,
            activity_paused=answer.paused,
            activity_reset=answer.reset,
        )

    @rpc
    async def RecordActivityTaskHeartbeatById(self, request, context):  # noqa: N802
        namespace, token = await _activity_by_id(request)
        answer = await _heartbeat(namespace, token, request)
        return rr.RecordActivityTaskHeartbeatByIdResponse(
            cancel_requested=answer.cancel_requested,
            activity_paused=answer.paused,
            activity_reset=answer.reset,
        )

    @rpc
    async def RespondActivityTaskCompleted(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        await _activity_completed(namespace, _token(namespace, request.task_token), request)
        return rr.RespondActivityTaskCompletedResponse()

    @rpc
    async def RespondActivityTaskCompletedById(self, request, context):  # noqa: N802
        await _activity_completed(*await _activity_by_id(request), request)
        return rr.RespondActivityTaskCompletedByIdResponse()

    @rpc
    async def RespondActivityTaskFailed(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        await _activity_failed(namespace, _token(namespace, request.task_token), request)
        return rr.RespondActivityTaskFailedResponse()

    @rpc
    async def RespondActivityTaskFailedById(self, request, context):  # noqa: N802
        await _activity_failed(*await _activity_by_id(request), request)
        return rr.RespondActivityTaskFailedByIdResponse()

    @rpc
    async def RespondActivityTaskCanceled(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        await _activity_canceled(namespace, _token(namespace, request.task_token), request)
        return rr.RespondActivityTaskCanceledResponse()

    @rpc
    async def RespondActivityTaskCanceledById(self, request, context):  # noqa: N802
        await _activity_canceled(*await _activity_by_id(request), request)
        return rr.RespondActivityTaskCanceledByIdResponse()

    # --- operator controls of pending activities ---------------------------------------------

    @rpc
    async def PauseActivity(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        target = _activity_target(request)
        await dbthreads.run(
            activity_control_services.activity_pause,
            namespace=namespace,
            workflow_id=request.execution.workflow_id,
            run_id=request.execution.run_id,
            target=target,
            identity=request.identity,
            reason=request.reason,
            request_id=request.request_id,
        )
        return rr.PauseActivityResponse()

    @rpc
    async def UnpauseActivity(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        target = _activity_target(request)
        await dbthreads.run(
            activity_control_services.activity_unpause,
            namespace=namespace,
            workflow_id=request.execution.workflow_id,
            run_id=request.execution.run_id,
            target=target,
            reset_attempts=request.reset_attempts,
            reset_heartbeat=request.reset_heartbeat,
            jitter=_jitter(request),
        )
        return rr.UnpauseActivityResponse()

    @rpc
    async def ResetActivity(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        target = _activity_target(request)
        await dbthreads.run(
            activity_control_services.activity_reset,
            namespace=namespace,
            workflow_id=request.execution.workflow_id,
            run_id=request.execution.run_id,
            target=target,
            reset_heartbeat=request.reset_heartbeat,
            keep_paused=request.keep_paused,
            restore_original_options=request.restore_original_options,
            jitter=_jitter(request),
        )
        return rr.ResetActivityResponse()

    @rpc
    async def UpdateActivityOptions(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        target = _activity_target(request)
        if request.HasField("activity_options"):
            _validate_priority(request.activity_options.priority)
        options = await dbthreads.run(
            activity_control_services.activity_update_options,
            namespace=namespace,
            workflow_id=request.execution.workflow_id,
            run_id=request.execution.run_id,
            target=target,
            options=request.activity_options if request.HasField("activity_options") else None,
            paths=list(request.update_mask.paths) if request.HasField("update_mask") else None,
            restore_original=request.restore_original,
        )
        return rr.UpdateActivityOptionsResponse(activity_options=options)

    # The same controls as the CLI sends them: one activity by id, of a workflow (standalone activities
    # are not offered). Temporal's frontend hands these to the calls above.

    @rpc
    async def PauseActivityExecution(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        target = _workflow_activity(request)
        await dbthreads.run(
            activity_control_services.activity_pause,
            namespace=namespace,
            workflow_id=request.workflow_id,
            run_id=request.run_id,
            target=target,
            identity=request.identity,
            reason=request.reason,
            request_id=request.request_id or str(uuid.uuid4()),
        )
        return rr.PauseActivityExecutionResponse()

    @rpc
    async def UnpauseActivityExecution(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        target = _workflow_activity(request)
        await dbthreads.run(
            activity_control_services.activity_unpause,
            namespace=namespace,
            workflow_id=request.workflow_id,
            run_id=request.run_id,
            target=target,
            reset_attempts=request.reset_attempts,
            reset_heartbeat=request.reset_heartbeat,
            jitter=_jitter(request),
        )
        return rr.UnpauseActivityExecutionResponse()

    @rpc
    async def ResetActivityExecution(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        target = _workflow_activity(request)
        await dbthreads.run(
            activity_control_services.activity_reset,
            namespace=namespace,
            workflow_id=request.workflow_id,
            run_id=request.run_id,
            target=target,
            reset_heartbeat=getattr(request, "reset_heartbeat", False),  # newer API versions only
            keep_paused=request.keep_paused,
            restore_original_options=request.restore_original_options,
            jitter=_jitter(request),
        )
        return rr.ResetActivityExecutionResponse()

    @rpc
    async def UpdateActivityExecutionOptions(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        target = _workflow_activity(request)
        if request.HasField("activity_options"):
            _validate_priority(request.activity_options.priority)
        options = await dbthreads.run(
            activity_control_services.activity_update_options,
            namespace=namespace,
            workflow_id=request.workflow_id,
            run_id=request.run_id,
            target=target,
            options=request.activity_options if request.HasField("activity_options") else None,
            paths=list(request.update_mask.paths) if request.HasField("update_mask") else None,
            restore_original=request.restore_original,
        )
        return rr.UpdateActivityExecutionOptionsResponse(activity_options=options)

    @rpc
    async def ShutdownWorker(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        await task_queues.pollers_gone(namespace, request)
        if request.sticky_task_queue:
            await dbthreads.run(
                workflow_tasks.sticky_queue_shutdown,
                namespace=namespace,
                sticky_queue=request.sticky_task_queue,
            )
        return rr.ShutdownWorkerResponse()

    @rpc
    async def DescribeTaskQueue(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        return await task_queues.describe_task_queue(namespace, request)

    # --- schedules -------------------------------------------------------------------------------

    @rpc
    async def CreateSchedule(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        await _check_schedule_search_attributes(namespace, request)
        token = await dbthreads.run(schedules.schedule_create, namespace=namespace, request=request)
        return rr.CreateScheduleResponse(conflict_token=token.to_bytes(8, "big"))

    @rpc
    async def DescribeSchedule(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        return await dbthreads.run(
            schedules.schedule_describe, namespace=namespace, schedule_id=request.schedule_id
        )

    @rpc
    async def UpdateSchedule(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        await _check_schedule_search_attributes(namespace, request)
        await dbthreads.run(schedules.schedule_update, namespace=namespace, request=request)
        return rr.UpdateScheduleResponse()

    @rpc
    async def PatchSchedule(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        await dbthreads.run(schedules.schedule_patch, namespace=namespace, request=request)
        return rr.PatchScheduleResponse()

    @rpc
    async def DeleteSchedule(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        await dbthreads.run(schedules.schedule_delete, namespace=namespace, schedule_id=request.schedule_id)
        return rr.DeleteScheduleResponse()

    @rpc
    async def ListSchedules(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        return await dbthreads.run(
            schedules.schedule_list,
            namespace=namespace,
            page_size=request.maximum_page_size,
            page_token=request.next_page_token,
            query=request.query,
        )

    @rpc
    async def ListScheduleMatchingTimes(self, request, context):  # noqa: N802
        namespace = await _namespace(request.namespace)
        times = await dbthreads.run(schedules.schedule_matching_times, namespace=namespace, request=request)
        return rr.ListScheduleMatchingTimesResponse(start_time=times)

    # --- visibility (engine/api/visibility.py) --------------------------------------------------

    @rpc
    async def ListWorkflowExecutions(self, request, context):  # noqa: N802
        return await visibility_rpc.list_executions(request)

    @rpc
    async def ScanWorkflowExecutions(self, request, context):  # noqa: N802
        return await visibility_rpc.scan_executions(request)

    @rpc
    async def CountWorkflowExecutions(self, request, context):  # noqa: N802
        return await visibility_rpc.count_executions(request)

    @rpc
    async def ListOpenWorkflowExecutions(self, request, context):  # noqa: N802
        return await visibility_rpc.list_open(request)

    @rpc
    async def ListClosedWorkflowExecutions(self, request, context):  # noqa: N802
        return await visibility_rpc.list_closed(request)

    @rpc
    async def GetSearchAttributes(self, request, context):  # noqa: N802
        return await visibility_rpc.get_search_attributes(request)


async def _heartbeat(namespace, token, request) -> activity_rules.HeartbeatAnswer:  # type: ignore[no-untyped-def]
    if request.HasField("details"):
        validation.blob_size(request.details, "heartbeat details")
    return await dbthreads.run(
        activity_tasks.activity_heartbeat,
        namespace=namespace,
        token=token,
        details=request.details if request.HasField("details") else None,
    )


async def _activity_completed(namespace, token, request) -> None:  # type: ignore[no-untyped-def]
    if request.HasField("result"):
        validation.blob_size(request.result, "result")
    await dbthreads.run(
        activity_tasks.activity_complete,
        namespace=namespace,
        token=token,
        result=request.result if request.HasField("result") else None,
        identity=request.identity,
    )


async def _activity_failed(namespace, token, request) -> None:  # type: ignore[no-untyped-def]
    if not request.HasField("failure"):
        raise InvalidArgument("Failure is not set on request.")
    validation.blob_size(request.failure, "failure")
    await dbthreads.run(
        activity_tasks.activity_fail,
        namespace=namespace,
        token=token,
        failure=request.failure,
        identity=request.identity,
        last_heartbeat_details=request.last_heartbeat_details
        if request.HasField("last_heartbeat_details")
        else None,
    )


async def _activity_canceled(namespace, token, request) -> None:  # type: ignore[no-untyped-def]
    await dbthreads.run(
        activity_tasks.activity_canceled,
        namespace=namespace,
        token=token,
        details=request.details if request.HasField("details") else None,
        identity=request.identity,
    )


async def _activity_by_id(request):  # type: ignore[no-untyped-def]
    namespace = await _namespace(request.namespace)
    validation.require_id(request.workflow_id, "WorkflowId")
    validation.run_id(request.run_id)
    validation.require_id(request.activity_id, "ActivityId")
    token = await dbthreads.run(
        activity_tasks.token_for,
        namespace=namespace,
        workflow_id=request.workflow_id,
        run_id=request.run_id,
        activity_id=request.activity_id,
    )
    return namespace, token


def _activity_target(request) -> activity_control_rules.Target:  # type: ignore[no-untyped-def]
    """The activities an operator control names: by id, by type, or all (Temporal's frontend checks)."""
    validation.require_id(request.execution.workflow_id, "WorkflowId")
    validation.run_id(request.execution.run_id)
    which = request.WhichOneof("activity")
    if which is None:
        raise InvalidArgument("Either Activity.Id or Activity.Type should be set on request.")
    if which == "id":
        return activity_control_rules.Target(activity_id=request.id)
    if which == "type":
        return activity_control_rules.Target(activity_type=request.type)
    return activity_control_rules.Target(match_all=True)  # match_all or unpause_all


def _workflow_activity(request) -> activity_control_rules.Target:  # type: ignore[no-untyped-def]
    """The activity a *ActivityExecution control names (Temporal's chasm/lib/activity frontend checks)."""
    if not request.workflow_id:
        raise Unimplemented("Standalone activity is disabled")
    if not request.activity_id:
        raise InvalidArgument("activity ID is required")
    if len(request.activity_id) > validation.MAX_ID_LENGTH:
        raise InvalidArgument(
            f"activity ID exceeds length limit. Length={len(request.activity_id)} Limit={validation.MAX_ID_LENGTH}"
        )
    if request.run_id:
        try:
            uuid.UUID(request.run_id)
        except ValueError:
            raise InvalidArgument("invalid run id: must be a valid UUID") from None
    return activity_control_rules.Target(activity_id=request.activity_id)


def _jitter(request) -> float:  # type: ignore[no-untyped-def]
    jitter = request.jitter.ToTimedelta().total_seconds() if request.HasField("jitter") else 0.0
    if jitter < 0:
        raise InvalidArgument("invalid jitter: negative duration")
    return jitter


def _validate_priority(priority) -> None:  # type: ignore[no-untyped-def]
    """Temporal's priorities.Validate, with its messages."""
    if priority.priority_key < 0:
        raise InvalidArgument("priority key can't be negative")
    if len(priority.fairness_key) > 64:
        raise InvalidArgument("fairness key length exceeds limit")
    if priority.fairness_weight < 0:
        raise InvalidArgument("must be greater than zero")


def _validate_update(request: rr.UpdateWorkflowExecutionRequest) -> None:
    validation.require_id(request.workflow_execution.workflow_id, "WorkflowId")
    validation.run_id(request.workflow_execution.run_id)
    meta = request.request.meta
    if not meta.update_id:
        raise InvalidArgument("UpdateId is not set on request.")
    if len(meta.update_id) > validation.MAX_ID_LENGTH:
        raise InvalidArgument("UpdateId exceeds length limit.")
    if not request.request.input.name:
        raise InvalidArgument("Update name is not set on request.")
    if request.request.input.HasField("args"):
        validation.blob_size(request.request.input.args, "update args")


async def _update_response(
    context, namespace, update_id, status, wait_policy, default_stage=update_rules.COMPLETED
):  # type: ignore[no-untyped-def]
    """Wait (bounded) until the update reaches the stage asked for; answer with the stage reached."""
    # Unspecified: an update call waits for completion; a poll answers with the stage reached so far.
    wanted = wait_policy.lifecycle_stage or default_stage
    loop = asyncio.get_running_loop()
    deadline = _deadline(context, UPDATE_WAIT_SECONDS)
    with notify.hub.waiter(notify.run_key(status.execution.pk)) as waiter:
        while status.stage < wanted:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            await waiter.wait(min(remaining, QUEUE_RECHECK_SECONDS))
            waiter.rearm()
            status = await dbthreads.run(
                update_services.update_status,
                namespace=namespace,
                workflow_id=status.execution.workflow_id,
                run_id=status.run_id,
                update_id=update_id,
            )
    return rr.UpdateWorkflowExecutionResponse(
        update_ref=UpdateRef(
            workflow_execution=WorkflowExecution(
                workflow_id=status.execution.workflow_id, run_id=status.run_id
            ),
            update_id=update_id,
        ),
        outcome=status.outcome,
        stage=status.stage,
    )


def _multi_operation_error(error: EngineError, *, failed: int) -> EngineError:
    """Temporal's shape for a failed multi-operation: one status per operation, the others aborted."""
    statuses = []
    for index in range(2):
        if index == failed:
            status = MultiOperationExecutionFailure.OperationStatus(
                code=getattr(grpc.StatusCode, error.code).value[0], message=error.message
            )
            if error.details is not None:
                status.details.add().Pack(error.details)
        else:
            status = MultiOperationExecutionFailure.OperationStatus(
                code=grpc.StatusCode.ABORTED.value[0], message="Operation was aborted."
            )
            status.details.add().Pack(MultiOperationExecutionAborted())
        statuses.append(status)
    wrapped = type(error)(f"MultiOperation could not be executed: {error.message}")
    wrapped.details = MultiOperationExecutionFailure(statuses=statuses)
    return wrapped


def _query_timeout_message(task_queue: str) -> str:
    return (
        f"query timed out: no worker answered it on task queue {task_queue!r}; "
        "check that a worker for this workflow is running"
    )


async def _wait_for_answer(query_id, namespace, deadline, normal_queue):  # type: ignore[no-untyped-def]
    """The worker's answer, or None when the deadline passes.

    A query held for the run's workflow task is answered in its completion; one left unclaimed on the
    sticky queue for STICKY_QUERY_SECONDS moves to the normal queue. Every change is announced on the
    query's key, from whichever process made it.
    """
    loop = asyncio.get_running_loop()
    sticky_since: float | None = None
    with notify.hub.waiter(notify.query_key(query_id)) as waiter:
        while True:
            status = await dbthreads.run(queries.query_status, query_id)
            if status.answer is not None:
                return status.answer
            now = loop.time()
            if now >= deadline:
                return None
            wait = min(deadline - now, QUEUE_RECHECK_SECONDS)
            if status.task_queue and status.task_queue != normal_queue:
                sticky_since = now if sticky_since is None else sticky_since
                if now - sticky_since >= STICKY_QUERY_SECONDS:
                    await dbthreads.run(
                        queries.query_move,
                        query_id,
                        namespace=namespace,
                        from_queue=status.task_queue,
                        task_queue=normal_queue,
                    )
                    continue
                wait = min(wait, sticky_since + STICKY_QUERY_SECONDS - now)
            await waiter.wait(wait)
            waiter.rearm()


async def _query_task_response(
    namespace: Namespace, started: queries.StartedQuery
) -> rr.PollWorkflowTaskQueueResponse:
    execution = started.execution
    state = started.state
    events = await dbthreads.run(
        lambda: list(
            store.history_events(
                execution, first_event_id=started.first_event_id, last_event_id=state.next_event_id - 1
            )
        )
    )
    token = tokens.TaskToken(
        namespace_id=str(namespace.id),
        workflow_id=execution.workflow_id,
        run_id=execution.run_id,
        scheduled_event_id=0,
        attempt=0,
        query_id=started.query_id,
    )
    return rr.PollWorkflowTaskQueueResponse(
        task_token=tokens.encode(token),
        workflow_execution=WorkflowExecution(workflow_id=execution.workflow_id, run_id=execution.run_id),
        workflow_type=WorkflowType(name=state.workflow_type),
        previous_started_event_id=state.last_completed_wft_started_event_id,
        history=History(events=events),
        query=started.query,
        workflow_execution_task_queue=TaskQueue(
            name=state.task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL
        ),
    )


async def _wait_for_history(context, execution, first_event_id: int, close_only: bool):  # type: ignore[no-untyped-def]
    """Long-poll until the run has events from `first_event_id` (or has closed), or the wait runs out."""
    loop = asyncio.get_running_loop()
    deadline = _deadline(context, HISTORY_WAIT_SECONDS)
    key = notify.closed_key(execution.pk) if close_only else notify.run_key(execution.pk)
    with notify.hub.waiter(key) as waiter:
        while True:
            if execution.status != RUNNING or (not close_only and execution.next_event_id > first_event_id):
                return execution
            remaining = deadline - loop.time()
            if remaining <= 0:
                return execution
            await waiter.wait(min(remaining, QUEUE_RECHECK_SECONDS))
            waiter.rearm()
            execution = await dbthreads.run(reads.reload, execution)


async def _workflow_task_response(
    namespace: Namespace, started: workflow_tasks.StartedWorkflowTask
) -> rr.PollWorkflowTaskQueueResponse:
    events = await dbthreads.run(
        lambda: list(
            store.history_events(
                started.execution,
                first_event_id=started.first_event_id,
                last_event_id=started.last_stored_event_id,
            )
        )
    )
    events.extend(started.transient_events)
    execution = started.execution
    token = tokens.TaskToken(
        namespace_id=str(namespace.id),
        workflow_id=execution.workflow_id,
        run_id=execution.run_id,
        scheduled_event_id=started.scheduled_event_id,
        attempt=started.attempt,
        started_event_id=started.started_event_id,
    )
    return rr.PollWorkflowTaskQueueResponse(
        task_token=tokens.encode(token),
        workflow_execution=WorkflowExecution(workflow_id=execution.workflow_id, run_id=execution.run_id),
        workflow_type=WorkflowType(name=started.workflow_type),
        previous_started_event_id=started.previous_started_event_id,
        started_event_id=started.started_event_id,
        attempt=started.attempt,
        history=History(events=events),
        workflow_execution_task_queue=TaskQueue(
            name=started.task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL
        ),
        scheduled_time=ts(started.scheduled_time),
        started_time=ts(started.started_time),
        messages=started.messages,
        queries=started.queries,
    )


def _activity_task_response(
    namespace: Namespace, started: activity_tasks.StartedActivityTask
) -> rr.PollActivityTaskQueueResponse:
    execution = started.execution
    scheduled = started.scheduled
    token = tokens.TaskToken(
        namespace_id=str(namespace.id),
        workflow_id=execution.workflow_id,
        run_id=execution.run_id,
        scheduled_event_id=started.scheduled_event_id,
        attempt=started.attempt,
        activity_id=scheduled.activity_id,
    )
    return rr.PollActivityTaskQueueResponse(
        task_token=tokens.encode(token),
        workflow_namespace=namespace.name,
        workflow_type=WorkflowType(name=started.workflow_type),
        workflow_execution=WorkflowExecution(workflow_id=execution.workflow_id, run_id=execution.run_id),
        activity_type=scheduled.activity_type,
        activity_id=scheduled.activity_id,
        header=scheduled.header,
        input=scheduled.input if scheduled.HasField("input") else None,
        heartbeat_details=started.heartbeat_details,
        scheduled_time=ts(started.scheduled_time),
        current_attempt_scheduled_time=ts(started.attempt_scheduled_time),
        started_time=ts(started.started_time),
        attempt=started.attempt,
        schedule_to_close_timeout=scheduled.schedule_to_close_timeout,
        start_to_close_timeout=scheduled.start_to_close_timeout,
        heartbeat_timeout=scheduled.heartbeat_timeout,
        retry_policy=scheduled.retry_policy,
        priority=scheduled.priority if scheduled.HasField("priority") else None,
    )


def _describe_execution(snap: reads.RunSnapshot) -> rr.DescribeWorkflowExecutionResponse:
    s = snap.state
    execution = snap.execution
    info = WorkflowExecutionInfo(
        execution=WorkflowExecution(workflow_id=s.workflow_id, run_id=s.run_id),
        type=WorkflowType(name=s.workflow_type),
        start_time=ts(s.start_time),
        close_time=ts(s.close_time),
        status=WorkflowExecutionStatus.ValueType(s.status),
        history_length=s.next_event_id - 1,
        execution_time=ts(s.execution_time),
        task_queue=s.task_queue,
        state_transition_count=s.state_transitions,
        history_size_bytes=s.history_size,
        first_run_id=s.first_run_id,
        memo=Memo.FromString(s.memo) if s.memo else None,
        search_attributes=SearchAttributes.FromString(s.search_attributes) if s.search_attributes else None,
    )
    if s.close_time is not None:
        info.execution_duration.FromTimedelta(s.close_time - s.execution_time)
    root = WorkflowExecution(workflow_id=s.workflow_id, run_id=s.run_id)
    if s.parent is not None:
        info.parent_namespace_id = s.parent.namespace_id
        info.parent_execution.CopyFrom(
            WorkflowExecution(workflow_id=s.parent.workflow_id, run_id=s.parent.run_id)
        )
        root = WorkflowExecution(workflow_id=s.parent.root_workflow_id, run_id=s.parent.root_run_id)
    info.root_execution.CopyFrom(root)
    now = clock.now()
    pending = [
        pending_activity(a, now) for a in sorted(s.activities.values(), key=lambda a: a.scheduled_event_id)
    ]
    response = rr.DescribeWorkflowExecutionResponse(
        execution_config=WorkflowExecutionConfig(
            task_queue=TaskQueue(name=s.task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
            workflow_execution_timeout=dur(s.execution_timeout),
            workflow_run_timeout=dur(s.run_timeout),
            default_workflow_task_timeout=dur(s.workflow_task_timeout),
            user_metadata=UserMetadata.FromString(s.user_metadata) if s.user_metadata else None,
        ),
        workflow_execution_info=info,
        pending_activities=pending,
        pending_children=[
            PendingChildExecutionInfo(
                workflow_id=c.workflow_id,
                run_id=c.run_id,
                workflow_type_name=c.workflow_type,
                initiated_id=c.initiated_event_id,
                parent_close_policy=c.parent_close_policy,
            )
            for c in sorted(s.children.values(), key=lambda c: c.initiated_event_id)
        ],
    )
    wft = s.workflow_task
    if wft is not None:
        response.pending_workflow_task.CopyFrom(
            PendingWorkflowTaskInfo(
                state=2 if wft.started_event_id else 1,
                scheduled_time=ts(wft.scheduled_time),
                original_scheduled_time=ts(wft.scheduled_time),
                started_time=ts(wft.started_time),
                attempt=wft.attempt,
            )
        )
    del execution
    return response


async def _check_schedule_search_attributes(namespace: Namespace, request) -> None:  # type: ignore[no-untyped-def]
    """A schedule's own attributes and those its runs will start with are checked, and typed, like a start's."""
    if request.HasField("search_attributes"):
        await visibility_rpc.check_search_attributes(namespace, request.search_attributes)
    action = request.schedule.action
    if action.HasField("start_workflow") and action.start_workflow.HasField("search_attributes"):
        await visibility_rpc.check_search_attributes(namespace, action.start_workflow.search_attributes)


def _unimplemented(name: str):  # type: ignore[no-untyped-def]
    async def handler(self, request, context):  # type: ignore[no-untyped-def]
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"Perdura does not implement {name} yet.")

    handler.__name__ = name
    return handler


# Every WorkflowService method Perdura lacks answers UNIMPLEMENTED with its name, not grpc's generic text.
for _name, _value in vars(wss.WorkflowServiceServicer).items():
    if callable(_value) and not _name.startswith("_") and _name not in vars(WorkflowService):
        setattr(WorkflowService, _name, _unimplemented(_name))
