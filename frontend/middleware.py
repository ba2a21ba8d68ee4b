"""Security headers of the console's pages, and the time each took (`Server-Timing: app;dur=<ms>, cpu;dur=<ms>`).

The Content-Security-Policy allows scripts and styles from this origin only (no inline script, no eval,
no CDN), so even markup that slipped through escaping could not run. Pages connect to this origin only,
except a run page, which may also post to its namespace's codec server. The REST API's browsable pages and
its docs keep their own headers (the docs still load Swagger UI from its CDN: a later change).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse


def policy(connect_src: str = "") -> str:
    """The policy; `connect_src` adds one origin the page's script may fetch (a namespace's codec server)."""
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "font-src 'self'",
            f"connect-src 'self' {connect_src}".strip(),
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


POLICY = policy()


class ConsoleSecurityHeaders:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started, cpu = time.perf_counter(), time.thread_time()
        response = self.get_response(request)
        # The page's own time (view and templates) and the CPU time its thread spent on it (what a busy
        # machine does not inflate), for bench/console_run_page.py and browsers' devtools.
        response.headers.setdefault(
            "Server-Timing",
            f"app;dur={(time.perf_counter() - started) * 1000:.1f}, cpu;dur={(time.thread_time() - cpu) * 1000:.1f}",
        )
        if not request.path.startswith("/api/"):
            # A run page of a namespace with a codec server names that origin (frontend/views/runs.py);
            # it was checked when the namespace's admin set it (tenants/services/namespaces.py), so it
            # holds no spaces or semicolons that could widen the policy.
            extra = getattr(response, "csp_connect_src", "")
            response.headers.setdefault("Content-Security-Policy", policy(extra) if extra else POLICY)
            response.headers.setdefault("X-Frame-Options", "DENY")
            response.headers.setdefault("Referrer-Policy", "same-origin")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        return response
