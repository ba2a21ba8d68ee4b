"""The namespace settings page's data protection, for the namespace's admins: erase a data subject
(with a confirmation that says what it does and how many runs it touches), and the data key (its
version, rotate it, re-encrypt old ciphertexts, the job's progress).

Each write is the CLI's and the REST API's own service: `engine.exports.erasure.subject_erase` (which
records `subject.erase` with the person, as for the REST path), `tenants.datakeys.datakey_rotate`
(`namespace.rotate_key`), and the re-encryption job of engine/persistence/reencrypt.py, run by
frontend/reencryption.py.
"""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse

from engine.exports import erasure
from engine.history.subjects import DATA_SUBJECT
from frontend import reencryption
from frontend.tenant_views.pages import OrgPage, namespace_page
from frontend.tenant_views.settings import render_settings
from tenants import datakeys
from tenants.models import Namespace
from tenants.rest.permissions import Need
from visibility import selectors as visibility_selectors
from visibility.query.parser import QueryError

log = logging.getLogger("perdura.console")

ARCHIVE_COUNT_PAGES = 10
"""Pages of the archive index counted for the confirmation (1,000 runs each); past them it says "at least"."""


def _literal(value: str) -> str:
    """`value` as a string literal of the list-filter language."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _archived_count(namespace: Namespace, query: str) -> tuple[int, bool]:
    """How many archived runs match `query`, and whether the count stopped short of all of them."""
    count, token = 0, b""
    for _ in range(ARCHIVE_COUNT_PAGES):
        records, token = visibility_selectors.archived_execution_list(
            namespace_id=namespace.id, query=query, page_size=1000, page_token=token
        )
        count += len(records)
        if not token:
            return count, False
    return count, True


def _subject_error(subject: str) -> str | None:
    if not subject:
        return "Name the data subject (the runs' PerduraDataSubject value)."
    if len(subject) > erasure.MAX_SUBJECT_LENGTH:
        return f"A data subject is at most {erasure.MAX_SUBJECT_LENGTH} characters."
    return None


@namespace_page(POST=Need.NAMESPACE_ADMIN)
def erase(request: HttpRequest, page: OrgPage) -> HttpResponse:
    """POST a subject: the confirmation (what erasing does, the runs it touches); POST it again with
    `confirm`: the erasure, as `perdura erase` and the REST API do it, then back to the settings.

    The subject travels in POST bodies only: a person's id kept out of URLs stays out of access logs."""
    namespace = page.namespace
    assert namespace is not None
    subject = request.POST.get("subject", "")
    refused = _subject_error(subject)
    if refused is not None:
        return render_settings(page, status=400, errors={"erase": refused}, subject=subject)
    if request.POST.get("confirm") != "erase":
        query = f"{DATA_SUBJECT} = {_literal(subject)}"
        try:
            runs, _ = visibility_selectors.execution_count(namespace_id=namespace.id, query=query)
            running, _ = visibility_selectors.execution_count(
                namespace_id=namespace.id, query=query + " AND ExecutionStatus = 'Running'"
            )
            archived, more = _archived_count(namespace, query)
        except QueryError as e:  # a value the list filter refuses (over a search attribute's size)
            return render_settings(page, status=400, errors={"erase": str(e)}, subject=subject)
        context = page.context(
            ns=namespace, subject=subject, runs=runs, running=running, archived=archived, more=more
        )
        return render(request, "frontend/tenant/namespace_erase.html", context)
    done = erasure.subject_erase(namespace=namespace, subject=subject)
    log.info(
        "a data subject of %s erased in the console by %s: %d keys destroyed, %d runs terminated",
        namespace.name,
        page.actor.label,
        len(done.key_ids),
        len(done.terminated),
    )
    return HttpResponseRedirect(
        reverse("console-namespace-settings", kwargs={"namespace": namespace.name})
        + f"?done=erased&destroyed={len(done.key_ids)}&terminated={len(done.terminated)}#erasure"
    )


def _key_card(request: HttpRequest, page: OrgPage) -> HttpResponse:
    namespace = page.namespace
    assert namespace is not None
    return render(
        request,
        "frontend/tenant/_data_key.html",
        {"ns": namespace, "key": reencryption.key_state(namespace.id), "errors": {}},
    )


@namespace_page(GET=Need.NAMESPACE_ADMIN)
def data_key(request: HttpRequest, page: OrgPage) -> HttpResponse:
    """The data key card alone: what the page polls while a re-encryption moves (htmx)."""
    return _key_card(request, page)


@namespace_page(POST=Need.NAMESPACE_ADMIN)
def rotate_key(request: HttpRequest, page: OrgPage) -> HttpResponse:
    """Start the next data key version for new writes, then move old ciphertexts to it (as
    `perdura namespace rotate-key` does); refused while a re-encryption still moves."""
    namespace = page.namespace
    assert namespace is not None
    if request.POST.get("confirm") != "rotate":
        return render_settings(
            page, status=400, errors={"data_key": "Nothing was rotated: use the form's button."}
        )
    if reencryption.key_state(namespace.id).state in ("waiting", "running"):
        return render_settings(
            page,
            status=409,
            errors={"data_key": "A re-encryption is under way: rotate again once it has finished."},
        )
    key = datakeys.datakey_rotate(namespace=namespace)
    reencryption.queue(namespace.id)
    log.info(
        "namespace %s: data key version %d started in the console by %s",
        namespace.name,
        key.version,
        page.actor.label,
    )
    return _back(namespace, "rotated")


@namespace_page(POST=Need.NAMESPACE_ADMIN)
def reencrypt(request: HttpRequest, page: OrgPage) -> HttpResponse:
    """Queue the move of old ciphertexts to the current data key for the shard workers (as
    `perdura namespace reencrypt`), or retry a parked job; a job queued or moving already is left alone."""
    namespace = page.namespace
    assert namespace is not None
    state = reencryption.key_state(namespace.id)
    if state.state not in ("waiting", "running", "parked") and not state.needed:
        return render_settings(
            page,
            status=400,
            errors={"data_key": "Nothing to re-encrypt: every ciphertext is under the current version."},
        )
    started = reencryption.queue(namespace.id)
    return _back(namespace, "reencrypting" if started else "reencryption-running")


def _back(namespace: Namespace, done: str) -> HttpResponse:
    return HttpResponseRedirect(
        reverse("console-namespace-settings", kwargs={"namespace": namespace.name}) + f"?done={done}#data-key"
    )
