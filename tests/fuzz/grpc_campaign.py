"""The gRPC fuzz campaign: every WorkflowService and OperatorService method, over a real channel.

`Target` sends one request and judges the answer: OK or a client error passes; INTERNAL, UNKNOWN and any
status outside the allowed set is a finding, and so is a traceback that appears in the server's log while
the request was in flight. `Campaign` fills the pools with real things (namespaces, runs, task tokens
obtained by polling, a schedule), then runs hypothesis over each method's request strategy, and over
command lists answered against real workflow tasks.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from google.protobuf import text_format
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from temporalio.api.command.v1 import message_pb2 as command_pb2
from temporalio.api.common.v1 import message_pb2 as common_pb2
from temporalio.api.enums.v1 import command_type_pb2
from temporalio.api.operatorservice.v1 import service_pb2 as operator_service_pb2
from temporalio.api.schedule.v1 import message_pb2 as schedule_pb2
from temporalio.api.taskqueue.v1 import message_pb2 as taskqueue_pb2
from temporalio.api.workflow.v1 import message_pb2 as workflow_pb2
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.api.workflowservice.v1 import service_pb2 as workflow_service_pb2

from tests.fuzz.strategies import Builder, Pools, bad_utf8_paths, command_lists, serialize

OK = grpc.StatusCode.OK
CLIENT_ERRORS = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.CANCELLED,
    }
)
INTERNAL = frozenset({grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS})
LONG_POLLS = frozenset(
    {
        "PollWorkflowTaskQueue",
        "PollActivityTaskQueue",
        "PollNexusTaskQueue",
        "PollWorkflowExecutionUpdate",
        "PollActivityExecution",
        "GetWorkflowExecutionHistory",
        "UpdateWorkflowExecution",
        "ExecuteMultiOperation",
        "QueryWorkflow",
    }
)
"""Calls that may wait for something to happen: cut short by our own deadline, DEADLINE_EXCEEDED is fine."""
LONG_POLL_DEADLINE = 1.3  # the server answers empty about a second before the caller's deadline
CALL_DEADLINE = 20.0
STALL_AFTER = 3
"""This many deadlines in a row on calls that never wait: the server is stuck, and the campaign stops."""

_FRAME = re.compile(r'  File "([^"]+)", line (\d+), in (\S+)')


@dataclass(frozen=True)
class Method:
    service: str
    name: str
    input: type[Message]
    output: type[Message]

    @property
    def path(self) -> str:
        return f"/{self.service}/{self.name}"


def all_methods() -> list[Method]:
    """Every method of both services, from the descriptors (a method a new SDK adds is fuzzed too)."""
    from google.protobuf import message_factory

    found = []
    for module, name in (
        (workflow_service_pb2, "WorkflowService"),
        (operator_service_pb2, "OperatorService"),
    ):
        service = module.DESCRIPTOR.services_by_name[name]
        for m in service.methods:
            found.append(
                Method(
                    service=service.full_name,
                    name=m.name,
                    input=message_factory.GetMessageClass(m.input_type),
                    output=message_factory.GetMessageClass(m.output_type),
                )
            )
    return found


_OURS = re.compile(r"/(engine|tenants|visibility|platform/perdura)/")


def last_frame(traceback_text: str) -> str:
    """`file:line in function: ExceptionLine` of a traceback (with the last frame of our own code when the
    last one is a library's): enough to tell two failures apart."""
    frames = _FRAME.findall(traceback_text)
    tail = traceback_text.strip().splitlines()[-1] if traceback_text.strip() else ""
    # One finding for every message type and every value: "Nanos -98" and "Nanos -97" are one bug (else
    # hypothesis shrinks each as a bug of its own).
    tail = re.sub(r"with type '[^']+'", "with type '...'", tail)
    tail = re.sub(r"-?\d+", "N", tail)
    tail = re.sub(r"“[^”]*”", "“...”", tail)  # Django quotes the offending value so
    if not frames:
        return tail[:200]

    def short(frame: tuple[str, str, str]) -> str:
        path, line, func = frame
        path = re.sub(r"^.*/site-packages/", "", path)
        path = re.sub(r"^/.*?/(?=(engine|tenants|visibility|platform|tests)/)", "", path)  # the checkout
        return f"{path}:{line} in {func}"

    ours = [f for f in frames if _OURS.search(f[0]) and "site-packages" not in f[0]]
    where = short(frames[-1])
    if ours and ours[-1] != frames[-1]:
        where = f"{short(ours[-1])} -> {where}"
    return f"{where}: {tail[:200]}"


def tracebacks(log_text: str) -> list[str]:
    """Each traceback in a slice of the server log, summarised by its last frame and exception."""
    found = []
    for start in [m.start() for m in re.finditer(r"Traceback \(most recent call last\):", log_text)]:
        block = log_text[start:]
        lines = block.splitlines()
        end = 1
        while end < len(lines) and (lines[end].startswith((" ", "\t")) or not lines[end].strip()):
            end += 1
        # chained exceptions ("During handling...", "The above exception...") belong to the next block
        found.append(last_frame("\n".join(lines[: end + 1])))
    return found


@dataclass
class Finding:
    method: str
    status: str
    detail: str
    frame: str
    request: str
    size: int
    count: int = 1


def describe(request: Message, *, limit: int = 1500) -> str:
    """The request as text, long strings cut, invalid UTF-8 shown as its marker."""
    text = text_format.MessageToString(request, as_one_line=True, print_unknown_fields=True)
    text = re.sub(
        r'"([^"\\]|\\.){120,}?"', lambda m: m.group(0)[:60] + f'..."({len(m.group(0))} chars)', text
    )
    paths = bad_utf8_paths(request)
    if paths:
        text += f"  [invalid UTF-8 on the wire in {', '.join(paths)}]"
    return text[:limit]


@dataclass
class Target:
    """One running Perdura: a channel to it and the logs that must stay free of tracebacks."""

    address: str
    logs: list[Path]
    channel: grpc.Channel = field(init=False)
    offsets: dict[Path, int] = field(default_factory=dict)
    calls: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    answers: Counter = field(default_factory=Counter)
    """(method, status) -> count: how deep the fuzz got (OK and NOT_FOUND answers mean past validation)."""
    findings: dict[tuple[str, str, str], Finding] = field(default_factory=dict)
    background: Counter = field(default_factory=Counter)
    """Tracebacks logged between calls (shard work: transfers, timers), by frame."""
    suspects: dict[str, str] = field(default_factory=dict)
    """Per background frame, the call sent just before it first showed: the likely cause."""
    _last: tuple[str, Message] | None = None
    stalled: str = ""
    _deadlines_in_row: int = 0
    _stubs: dict[str, Callable] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.channel = grpc.insecure_channel(
            self.address,
            options=[("grpc.max_send_message_length", 1 << 27), ("grpc.max_receive_message_length", 1 << 27)],
        )
        for log in self.logs:
            self.offsets[log] = log.stat().st_size if log.exists() else 0

    def close(self) -> None:
        self.channel.close()

    def new_log(self) -> str:
        text = []
        for log in self.logs:
            if not log.exists():
                continue
            with log.open("rb") as f:
                f.seek(self.offsets.get(log, 0))
                chunk = f.read()
            self.offsets[log] = self.offsets.get(log, 0) + len(chunk)
            text.append(chunk.decode("utf-8", "replace"))
        return "".join(text)

    def raw(
        self, method: Method, request: Message, timeout: float
    ) -> tuple[grpc.StatusCode, str, Message | None]:
        if method.path not in self._stubs:
            self._stubs[method.path] = self.channel.unary_unary(
                method.path, request_serializer=serialize, response_deserializer=method.output.FromString
            )
        try:
            return OK, "", self._stubs[method.path](request, timeout=timeout)
        except grpc.RpcError as e:
            return e.code(), e.details() or "", None

    def call(self, method: Method, request: Message) -> tuple[grpc.StatusCode, Message | None, str]:
        """Send, judge, record. Returns the status, the answer (when OK) and the finding key ('' if fine)."""
        for frame in tracebacks(self.new_log()):  # what came before this call is not its fault
            self.background[frame] += 1
            if frame not in self.suspects and self._last:
                name, last = self._last
                self.suspects[frame] = f"{name} {describe(last, limit=600)}"
        long_poll = method.name in LONG_POLLS
        code, detail, answer = self.raw(method, request, LONG_POLL_DEADLINE if long_poll else CALL_DEADLINE)
        self.calls[method.name] += 1
        self._last = (method.name, request)
        self.statuses[code.name] += 1
        self.answers[method.name, code.name] += 1
        frames = tracebacks(self.new_log())
        if code is grpc.StatusCode.DEADLINE_EXCEEDED and not long_poll:
            self._deadlines_in_row += 1
            if self._deadlines_in_row >= STALL_AFTER:
                self.stalled = f"{STALL_AFTER} calls in a row past {CALL_DEADLINE}s, the last {method.name}"
        else:
            self._deadlines_in_row = 0
        fine = (
            code is OK or code in CLIENT_ERRORS or (long_poll and code is grpc.StatusCode.DEADLINE_EXCEEDED)
        )
        mangled = code is grpc.StatusCode.RESOURCE_EXHAUSTED and "metadata size exceeds" in detail
        if fine and not frames and not mangled:
            return code, answer, ""
        frame = frames[-1] if frames else "(no traceback in the server log)"
        if mangled:
            # The server's own answer carried a message over gRPC's 16 KiB metadata limit (an echoed input):
            # the client never saw it, only the transport's RESOURCE_EXHAUSTED.
            fine, frame = False, "(the answer's message exceeds gRPC's 16 KiB metadata limit)"
        status = code.name if not fine else f"{code.name} with a traceback in the log"
        key = (method.name, code.name, frame)
        known = self.findings.get(key)
        size = request.ByteSize()
        if known is None:
            self.findings[key] = Finding(method.name, status, detail[:300], frame, describe(request), size)
        else:
            known.count += 1
            if size < known.size:  # hypothesis's shrinking ends on the smallest: keep it
                known.request, known.size, known.detail = describe(request), size, detail[:300]
        return code, answer, "|".join(key)

    def internal_errors(self) -> int:
        return sum(f.count for f in self.findings.values())

    def write_findings(self, path: Path) -> None:
        with path.open("w") as out:
            for f in sorted(self.findings.values(), key=lambda f: (f.method, f.status)):
                out.write(json.dumps(f.__dict__) + "\n")
            for frame, n in self.background.items():
                out.write(
                    json.dumps({"background": frame, "count": n, "after": self.suspects.get(frame)}) + "\n"
                )
            answers: dict[str, dict[str, int]] = {}
            for (method, code), n in sorted(self.answers.items()):
                answers.setdefault(method, {})[code] = n
            out.write(json.dumps({"answers": answers}) + "\n")


# --- running hypothesis ------------------------------------------------------------------------------


def fuzz_settings(examples: int) -> settings:
    """CI: a fixed seed (derandomize) and no shrinking, so a run costs the same and fails the same way.
    On demand (PERDURA_FUZZ_PROFILE=long): random seeds and shrinking, for the catalogue."""
    long = os.environ.get("PERDURA_FUZZ_PROFILE", "ci") == "long"
    return settings(
        max_examples=examples,
        derandomize=not long,
        database=None,
        deadline=None,
        phases=(Phase.explicit, Phase.generate, Phase.shrink) if long else (Phase.explicit, Phase.generate),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=True,
        print_blob=False,
    )


_FAILURE_CLASSES: dict[str, type[AssertionError]] = {}


def _fail(key: str) -> None:
    """Raise an AssertionError of a class of its own per finding: hypothesis then shrinks each finding
    separately instead of stopping at the first."""
    if key not in _FAILURE_CLASSES:
        _FAILURE_CLASSES[key] = type(f"Finding{len(_FAILURE_CLASSES)}", (AssertionError,), {})
    raise _FAILURE_CLASSES[key](key)


def run_property(strategy: st.SearchStrategy, check: Callable[[object], str], examples: int) -> None:
    """Run `check` over `strategy`; with shrinking on, each bad answer raises so hypothesis minimises it
    (the Target keeps the smallest request per finding). Raises nothing: findings live in the Target."""
    shrink = os.environ.get("PERDURA_FUZZ_PROFILE", "ci") == "long"

    @fuzz_settings(examples)
    @given(strategy)
    def prop(value: object) -> None:
        key = check(value)
        if key and shrink:
            _fail(key)

    try:
        prop()
    except (AssertionError, BaseExceptionGroup):
        pass


# --- the campaign -------------------------------------------------------------------------------------

TASK_QUEUE = "fuzz-tq"
NAMESPACE_ENDERS = frozenset({"DeleteNamespace", "DeprecateNamespace", "UpdateNamespace"})
ENDERS = ("Delete", "Terminate")
"""Calls that remove what the pools name: after the rest, so those still find something."""
COMMAND_TASK_QUEUE = "fuzz-commands"


@dataclass
class Campaign:
    target: Target
    namespaces: list[str]
    pools: Pools = field(default_factory=Pools)
    methods: list[Method] = field(default_factory=all_methods)

    def __post_init__(self) -> None:
        self.pools.namespaces = list(self.namespaces)
        self.pools.task_queues = [TASK_QUEUE, COMMAND_TASK_QUEUE]
        self.builder = Builder(self.pools)
        self._by_name = {m.name: m for m in self.methods}

    def ok(self, name: str, request: Message) -> Message:
        """A setup call: it must succeed."""
        code, detail, answer = self.target.raw(self._by_name[name], request, CALL_DEADLINE)
        assert code is OK, f"setup {name}: {code.name} {detail}"
        return answer

    def start(self, namespace: str, task_queue: str = TASK_QUEUE) -> tuple[str, str]:
        workflow_id = f"fuzz-{uuid.uuid4().hex[:12]}"
        answer = self.ok(
            "StartWorkflowExecution",
            rr.StartWorkflowExecutionRequest(
                namespace=namespace,
                workflow_id=workflow_id,
                workflow_type=common_pb2.WorkflowType(name="FuzzWorkflow"),
                task_queue=taskqueue_pb2.TaskQueue(name=task_queue),
                request_id=str(uuid.uuid4()),
                identity="fuzz",
            ),
        )
        self.pools.add("workflow_ids", workflow_id)
        self.pools.add("run_ids", answer.run_id)
        return workflow_id, answer.run_id

    def poll_workflow_task(self, namespace: str, task_queue: str) -> rr.PollWorkflowTaskQueueResponse | None:
        code, _, answer = self.target.raw(
            self._by_name["PollWorkflowTaskQueue"],
            rr.PollWorkflowTaskQueueRequest(
                namespace=namespace, task_queue=taskqueue_pb2.TaskQueue(name=task_queue), identity="fuzz"
            ),
            5.0,
        )
        if code is not OK or not answer.task_token:
            return None
        self.pools.add("task_tokens", answer.task_token)
        return answer

    def prepare(self) -> None:
        """Real things to aim at: runs with open workflow tasks, an activity task, a timer, a schedule."""
        for namespace in self.namespaces:
            info = self.ok("DescribeNamespace", rr.DescribeNamespaceRequest(namespace=namespace))
            self.pools.add("namespace_ids", info.namespace_info.id)
            for _ in range(3):
                self.start(namespace)
            for i in range(3):
                task = self.poll_workflow_task(namespace, TASK_QUEUE)
                if task is None or i == 2:
                    continue  # the last one stays open: a live token to fuzz with
                activity_id = f"act-{uuid.uuid4().hex[:6]}"
                self.pools.add("activity_ids", activity_id)
                commands = [
                    command_pb2.Command(
                        command_type=command_type_pb2.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK,
                        schedule_activity_task_command_attributes=command_pb2.ScheduleActivityTaskCommandAttributes(
                            activity_id=activity_id,
                            activity_type=common_pb2.ActivityType(name="fuzz_activity"),
                            task_queue=taskqueue_pb2.TaskQueue(name=TASK_QUEUE),
                            start_to_close_timeout=Duration(seconds=600),
                        ),
                    ),
                    command_pb2.Command(
                        command_type=command_type_pb2.COMMAND_TYPE_START_TIMER,
                        start_timer_command_attributes=command_pb2.StartTimerCommandAttributes(
                            timer_id="t1", start_to_fire_timeout=Duration(seconds=3600)
                        ),
                    ),
                ]
                self.ok(
                    "RespondWorkflowTaskCompleted",
                    rr.RespondWorkflowTaskCompletedRequest(
                        namespace=namespace, task_token=task.task_token, commands=commands, identity="fuzz"
                    ),
                )
                code, _, answer = self.target.raw(
                    self._by_name["PollActivityTaskQueue"],
                    rr.PollActivityTaskQueueRequest(
                        namespace=namespace,
                        task_queue=taskqueue_pb2.TaskQueue(name=TASK_QUEUE),
                        identity="fuzz",
                    ),
                    5.0,
                )
                if code is OK and answer.task_token:
                    self.pools.add("task_tokens", answer.task_token)
            schedule_id = f"fuzz-schedule-{uuid.uuid4().hex[:6]}"
            self.ok(
                "CreateSchedule",
                rr.CreateScheduleRequest(
                    namespace=namespace,
                    schedule_id=schedule_id,
                    request_id=str(uuid.uuid4()),
                    schedule=schedule_pb2.Schedule(
                        spec=schedule_pb2.ScheduleSpec(
                            interval=[schedule_pb2.IntervalSpec(interval=Duration(seconds=3600))]
                        ),
                        action=schedule_pb2.ScheduleAction(
                            start_workflow=workflow_pb2.NewWorkflowExecutionInfo(
                                workflow_id=f"{schedule_id}-wf",
                                workflow_type=common_pb2.WorkflowType(name="FuzzWorkflow"),
                                task_queue=taskqueue_pb2.TaskQueue(name=TASK_QUEUE),
                            )
                        ),
                    ),
                ),
            )
            self.pools.add("schedule_ids", schedule_id)

    def harvest(self, answer: Message | None) -> None:
        """Tokens and ids that a fuzzed call handed out (a poll that got a task) join the pools."""
        if answer is None:
            return
        for name in ("task_token", "run_id", "update_id"):
            value = getattr(answer, name, None) if name in answer.DESCRIPTOR.fields_by_name else None
            if value:
                self.pools.add(
                    {"task_token": "task_tokens", "run_id": "run_ids"}.get(name, "update_ids"), value
                )

    def fuzz_method(self, method: Method, examples: int) -> None:
        def check(request: object) -> str:
            if self.target.stalled:
                return ""
            _, answer, key = self.target.call(method, request)  # type: ignore[arg-type]  # hypothesis draws the method's request message
            self.harvest(answer)
            return key

        run_property(self.builder.message(method.input.DESCRIPTOR), check, examples)

    def fuzz_commands(self, examples: int) -> None:
        """Command lists of every type answered against real workflow tasks: start a run, poll its task,
        complete it with the drawn commands (the namespace is the run's own: the commands are the point)."""
        respond = self._by_name["RespondWorkflowTaskCompleted"]
        namespace = self.namespaces[-1]

        def check(commands: object) -> str:
            if self.target.stalled:
                return ""
            self.start(namespace, COMMAND_TASK_QUEUE)
            task = self.poll_workflow_task(namespace, COMMAND_TASK_QUEUE)
            if task is None:
                return ""
            request = rr.RespondWorkflowTaskCompletedRequest(
                namespace=namespace, task_token=task.task_token, commands=commands, identity="fuzz"
            )
            _, _, key = self.target.call(respond, request)
            return key

        # Commands name the run's own namespace (or none): another one is refused before anything else.
        pools = dataclasses.replace(self.pools, namespaces=[namespace, ""])
        run_property(command_lists(Builder(pools, timeouts_always=True)), check, examples)

    def run(self, *, examples: int, command_examples: int, budget: float) -> dict:
        """Fuzz every method (and command lists) within `budget` seconds of wall time; the figures."""
        began = time.monotonic()
        self.prepare()
        covered = []
        # Calls that deprecate or delete the namespaces go last, and those that delete runs or schedules
        # just before: earlier, they would turn the rest into NOT_FOUND answers that test nothing.
        order = sorted(self.methods, key=lambda m: (m.name in NAMESPACE_ENDERS, m.name.startswith(ENDERS)))
        self.fuzz_commands(command_examples)
        for method in order:
            if self.target.stalled or time.monotonic() - began > budget:
                break
            self.fuzz_method(method, examples)
            covered.append(method.name)
        time.sleep(0.5)
        leftovers = tracebacks(self.target.new_log())  # background work (timers, transfers) after the calls
        for frame in leftovers:
            self.target.background[frame] += 1
        return {
            "requests": sum(self.target.calls.values()),
            "methods": len(covered),
            "of": len(self.methods),
            "internal": self.target.internal_errors(),
            "background": sum(self.target.background.values()),
            "seconds": time.monotonic() - began,
            "stalled": self.target.stalled,
        }
