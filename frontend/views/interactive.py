"""Queries, updates and the workflow's stack trace from the run page. They wait for a worker, so
their views are coroutines (engine.services.console_calls): a wait must not hold the thread every
synchronous view of the process shares.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from engine.errors import EngineError, NotFound
from engine.services import console_calls
from frontend.console_audit import context_of
from frontend.payloads import decode_all
from frontend.viewer import Viewer, viewer_for
from frontend.views.actions import (
    QUERY,
    UPDATE,
    FormError,
    allowed,
    identity,
    json_payloads,
    record,
    result_part,
)
from tenants import audit

QUERY_TIMEOUT_SECONDS = 10.0
UPDATE_TIMEOUT_SECONDS = 10.0

AsyncPage = Callable[..., Awaitable[HttpResponse]]
P = ParamSpec("P")
R = TypeVar("R")


def to_thread(function: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """`function` run on a worker thread of its own (sync_to_async, not thread-sensitive)."""
    return sync_to_async(function, thread_sensitive=False)


def async_console_page(view: AsyncPage) -> AsyncPage:
    """`console_page` for coroutine views: the viewer is resolved on a database thread."""

    @functools.wraps(view)
    async def wrapper(request: HttpRequest, **kwargs: str) -> HttpResponse:
        viewer = await sync_to_async(viewer_for, thread_sensitive=False)(request)
        if viewer is None:
            return HttpResponseRedirect(
                reverse("console-login") + "?" + urlencode({"next": request.get_full_path()})
            )
        return await view(request, viewer, **kwargs)

    return wrapper


async def _ask_query(
    request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str, query_type: str
) -> HttpResponse:
    ns = await sync_to_async(allowed, thread_sensitive=False)(
        request, viewer, namespace, QUERY, workflow_id, run_id
    )
    try:
        args = json_payloads(request.POST.get("input", ""))
        answer = await console_calls.query_ask(
            namespace=ns,
            workflow_id=workflow_id,
            run_id=run_id,
            query_type=query_type,
            args=args,
            timeout=QUERY_TIMEOUT_SECONDS,
        )
    except NotFound:
        raise Http404("workflow run not found") from None
    except (FormError, EngineError) as e:
        return result_part(request, error=str(e), title=query_type)
    payloads = decode_all(answer) if answer is not None else []
    if query_type == console_calls.STACK_TRACE_QUERY:
        # The SDKs answer with one string: shown as the text it is, not as a JSON string literal.
        texts = [json.loads(p.text) if p.kind == "json" else p.text for p in payloads]
        return result_part(
            request, stack="\n".join(t if isinstance(t, str) else json.dumps(t) for t in texts)
        )
    return result_part(request, payloads=payloads, title=query_type)


@require_POST
@async_console_page
async def query(
    request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    name = request.POST.get("name", "").strip()
    if not name:
        # The namespace and run are checked first, as for every action: a person without a role on the
        # namespace gets its 404, not the form's complaint (tests/integration/test_console_authorization.py).
        await sync_to_async(allowed, thread_sensitive=False)(
            request, viewer, namespace, QUERY, workflow_id, run_id
        )
        return result_part(request, error="Give the query's name.")
    return await _ask_query(request, viewer, namespace, workflow_id, run_id, name)


@require_POST
@async_console_page
async def stack_trace(
    request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    return await _ask_query(request, viewer, namespace, workflow_id, run_id, console_calls.STACK_TRACE_QUERY)


@require_POST
@async_console_page
async def update(
    request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    ns = await to_thread(allowed)(request, viewer, namespace, UPDATE, workflow_id, run_id)
    context = await to_thread(context_of)(request)
    name = request.POST.get("name", "").strip()
    try:
        if not name:
            raise FormError("Give the update's name.")
        args = json_payloads(request.POST.get("input", ""))
    except FormError as e:
        return result_part(request, error=str(e), title=name)
    details = {"update_name": name}
    try:
        answer = await console_calls.update_ask(
            namespace=ns,
            workflow_id=workflow_id,
            run_id=run_id,
            name=name,
            args=args,
            identity=identity(viewer),
            timeout=UPDATE_TIMEOUT_SECONDS,
        )
    except EngineError as e:
        await to_thread(record)(
            context, ns, UPDATE, workflow_id, run_id, outcome=audit.FAILED, code=e.code, details=details
        )
        return result_part(request, error=str(e), title=name)
    await to_thread(record)(context, ns, UPDATE, workflow_id, run_id, details=details)
    if answer.outcome is None:
        return result_part(
            request,
            error=f"Update {answer.update_id} was admitted, but no worker completed it within "
            f"{UPDATE_TIMEOUT_SECONDS:.0f} s; it stays pending on the run.",
            title=name,
        )
    if answer.outcome.HasField("failure"):
        return result_part(request, error=answer.outcome.failure.message or "the update failed", title=name)
    return result_part(request, payloads=decode_all(answer.outcome.success), title=name)
