"""The control plane's errors: what a request may not do, with a message for a person.

Transports map them: the REST API (tenants/rest/errors.py) answers TenantError with 400, Forbidden
with 403; the gRPC namespace calls (engine/api/namespaces.py) answer InvalidArgument, AlreadyExists
or FailedPrecondition.
"""

from __future__ import annotations


class TenantError(ValueError):
    """A control-plane request that cannot be honoured, with a message for a person."""


class Forbidden(TenantError):
    """The actor may see the object but not make this change (403)."""


class NamespaceError(TenantError):
    """A namespace's name, retention or state does not allow the change."""


class NamespaceAlreadyExists(NamespaceError):
    """The namespace name is taken."""


class OrganizationAlreadyExists(TenantError):
    """The organisation name (slug) is taken."""


class QuotaExceeded(TenantError):
    """An organisation is at one of its caps (tenants/quotas.py)."""
