"""Run lifecycle transitions, one module per transition; these names are the package's public face.

run_start: a run begins. signals: signals and cancel requests reach it. endings: it is terminated, times
out, or the workflow closes it. chain: the run that follows (continue-as-new, retry, cron). closing: what
every close shares.
"""

from engine.history.lifecycle.chain import continue_as_new, min_backoff
from engine.history.lifecycle.closing import close
from engine.history.lifecycle.endings import (
    DEFAULT_TERMINATE_REASON,
    cancel,
    complete,
    fail,
    run_timeout,
    terminate,
)
from engine.history.lifecycle.run_start import (
    DEFAULT_WORKFLOW_TASK_TIMEOUT,
    MAX_WORKFLOW_TASK_TIMEOUT,
    Continuation,
    backoff_elapsed,
    effective_timeouts,
    start,
)
from engine.history.lifecycle.signals import MAX_SIGNAL_REQUEST_IDS, request_cancel, signal

__all__ = [
    "DEFAULT_TERMINATE_REASON",
    "DEFAULT_WORKFLOW_TASK_TIMEOUT",
    "MAX_SIGNAL_REQUEST_IDS",
    "MAX_WORKFLOW_TASK_TIMEOUT",
    "Continuation",
    "backoff_elapsed",
    "cancel",
    "close",
    "complete",
    "continue_as_new",
    "effective_timeouts",
    "fail",
    "min_backoff",
    "request_cancel",
    "run_timeout",
    "signal",
    "start",
    "terminate",
]
