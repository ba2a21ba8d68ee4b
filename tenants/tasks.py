"""Celery tasks of the control plane: thin wrappers over tenants services (idempotent)."""

from __future__ import annotations

from celery import shared_task

from tenants import audit


@shared_task(name="tenants.tasks.audit_prune", ignore_result=True)
def audit_prune() -> int:
    """Beat's daily retention pass over the audit log (PERDURA_AUDIT_RETENTION_DAYS); the count deleted."""
    return audit.prune().deleted
