"""`{% run_actions %}`: the run page's action bar, for the viewer's role and the run's state."""

from __future__ import annotations

from django import template

from frontend.views.actions import toolbar_context

register = template.Library()


@register.inclusion_tag("frontend/_actions.html", takes_context=True)
def run_actions(context: template.Context) -> dict[str, object]:
    summary = context["summary"]
    return toolbar_context(
        context["viewer"],
        namespace=context["namespace"],
        workflow_id=summary["workflow_id"],
        run_id=summary["run_id"],
        status=summary["status"],
    )
