"""How the REST API's authentication appears in the OpenAPI schema (drf-spectacular extensions)."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "tenants.rest.authentication.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "a Perdura API key: pdk_<prefix>_<secret>"}


class SessionScheme(OpenApiAuthenticationExtension):
    target_class = "tenants.rest.authentication.SessionAuthentication"
    name = "session"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "cookie",
            "name": "sessionid",
            "description": "send X-CSRFToken on writes",
        }
