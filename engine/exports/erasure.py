"""Erasure by key destruction: a data subject's key is destroyed, its running runs terminated, the act audited.

What it destroys and what stays is in the README (Erasure). The key goes first, so nothing the subject's
runs write while they are being terminated can be read either; the terminations carry no payload, so
they make no new key for the subject (engine/persistence/subject_seal.py finds keys at the first payload).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.errors import NotFound
from engine.history.subjects import DATA_SUBJECT
from engine.services import workflows
from tenants import audit, subject_keys
from tenants.models import Namespace
from visibility import selectors

REASON = "data subject erased: its data key was destroyed (perdura erase)"
"""The termination reason of a running run of an erased subject."""
IDENTITY = "perdura-erasure"
MAX_SUBJECT_LENGTH = 2048
"""A search attribute value's limit (visibility.search_attributes.MAX_VALUE_BYTES)."""


@dataclass(frozen=True, slots=True)
class Erasure:
    """What one erasure did."""

    subject: str
    key_ids: list[str]
    """The subject keys destroyed now (empty when the subject had no live key)."""
    terminated: list[tuple[str, str]] = field(default_factory=list)
    """(workflow id, run id) of the running runs terminated."""


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _running_runs(namespace: Namespace, subject: str) -> list[tuple[str, str]]:
    query = f"{DATA_SUBJECT} = {_literal(subject)} AND ExecutionStatus = 'Running'"
    found: list[tuple[str, str]] = []
    token = b""
    while True:
        records, token = selectors.execution_scan(
            namespace_id=namespace.id, query=query, page_size=500, page_token=token
        )
        found += [(r.workflow_id, r.run_id) for r in records]
        if not token:
            return found


def subject_erase(*, namespace: Namespace, subject: str) -> Erasure:
    """Destroy the subject's keys in `namespace`, terminate its running runs, and record `subject.erase`
    (the bound audit context names who erased). Idempotent: erasing again destroys nothing more.

    Raises:
        ValueError: an empty or over-long subject.
    """
    if not subject or len(subject) > MAX_SUBJECT_LENGTH:
        raise ValueError(f"a subject is 1 to {MAX_SUBJECT_LENGTH} characters")
    destroyed = subject_keys.subject_keys_destroy(namespace=namespace, subject=subject)
    terminated: list[tuple[str, str]] = []
    for workflow_id, run_id in _running_runs(namespace, subject):
        try:
            workflows.workflow_terminate(
                namespace=namespace,
                workflow_id=workflow_id,
                run_id=run_id,
                reason=REASON,
                details=None,
                identity=IDENTITY,
            )
        except NotFound:
            continue  # closed meanwhile
        terminated.append((workflow_id, run_id))
    audit.record_change(
        action="subject.erase",
        target=f"subject/{subject}",
        namespace=namespace,
        details={
            "destroyed_keys": destroyed.key_ids,
            "terminated_runs": [f"workflow/{w}/{r}" for w, r in terminated],
        },
    )
    return Erasure(subject=subject, key_ids=destroyed.key_ids, terminated=terminated)
