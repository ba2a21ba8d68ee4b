"""The request type of views that read django-htmx's details (`request.htmx`, set by HtmxMiddleware).

django-htmx's documented way to type them: HttpRequest does not declare the attribute the middleware adds.
"""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """A request as HtmxMiddleware hands it on; for annotations only (requests stay Django's own)."""

    htmx: HtmxDetails
