"""The side navigation's sections: which one a page belongs to, so its link is marked current."""

from __future__ import annotations

from django import template

register = template.Library()

_SECTIONS = (
    ("console-run", "workflows"),
    ("console-workflows", "workflows"),
    ("console-list-", "workflows"),
    ("console-view-", "workflows"),
    ("console-schedule", "schedules"),
    ("console-batch", "batches"),
    ("console-namespace", "namespaces"),
    ("console-api-key", "api-keys"),
    ("console-member", "members"),
    ("console-invitation", "members"),
    ("console-audit", "audit"),
)


@register.filter
def nav_section(url_name: str | None) -> str:
    """The section of the page named `url_name` ('' for pages outside the navigation)."""
    for prefix, section in _SECTIONS:
        if (url_name or "").startswith(prefix):
            return section
    return ""
