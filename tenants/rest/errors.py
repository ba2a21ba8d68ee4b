"""Domain errors as REST answers: TenantError → 400, Forbidden → 403, NotFound → 404."""

from __future__ import annotations

from rest_framework import exceptions
from rest_framework.views import exception_handler as drf_exception_handler

from tenants.access import NotFound
from tenants.errors import Forbidden, OrganizationAlreadyExists, TenantError


class BadRequest(exceptions.APIException):
    status_code = 400
    default_code = "invalid"


def exception_handler(exc, context):
    if isinstance(exc, NotFound):
        exc = exceptions.NotFound(str(exc))
    elif isinstance(exc, Forbidden):
        exc = exceptions.PermissionDenied(str(exc))
    elif isinstance(exc, OrganizationAlreadyExists):
        exc = exceptions.ValidationError({"organization": [str(exc)]})
    elif isinstance(exc, TenantError):
        exc = BadRequest(str(exc))
    return drf_exception_handler(exc, context)
