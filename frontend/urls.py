"""Console URLs, shaped as the Temporal UI's so the links people share keep working.

A workflow id may hold slashes, so it is matched greedily up to the run id and `/history`.
"""

from django.urls import path, re_path

from frontend.views import actions, auth, export, home, runs, schedules, workflows
from frontend.views import timeline as timeline_views

urlpatterns = [
    path("", home.home, name="console-home"),
    path("login/", auth.login_page, name="console-login"),
    path("logout/", auth.logout_page, name="console-logout"),
    path("namespaces/<str:namespace>/workflows", workflows.workflows, name="console-workflows"),
    re_path(
        r"^namespaces/(?P<namespace>[^/]+)/workflows/(?P<workflow_id>.+)/(?P<run_id>[^/]+)/history$",
        runs.run_history,
        name="console-run",
    ),
    # Actions and interactive reads on a run (frontend/views/actions.py).
    *[
        re_path(
            r"^namespaces/(?P<namespace>[^/]+)/workflows/(?P<workflow_id>.+)/(?P<run_id>[^/]+)/"
            + suffix
            + "$",
            view,
            name=f"console-run-{name}",
        )
        for suffix, view, name in [
            ("actions", actions.bar, "bar"),
            ("cancel", actions.cancel, "cancel"),
            ("terminate", actions.terminate, "terminate"),
            ("signal", actions.signal, "signal"),
            ("query", actions.query, "query"),
            ("stack-trace", actions.stack_trace, "stack-trace"),
            ("update", actions.update, "update"),
            ("reset", actions.reset_form, "reset-form"),
            ("reset/preview", actions.reset_preview_part, "reset-preview"),
            ("reset/run", actions.reset, "reset"),
        ]
    ],
    # The run page's timeline, export and the schedules pages (console-timeline).
    re_path(
        r"^namespaces/(?P<namespace>[^/]+)/workflows/(?P<workflow_id>.+)/(?P<run_id>[^/]+)/timeline$",
        timeline_views.run_timeline,
        name="console-run-timeline",
    ),
    re_path(
        r"^namespaces/(?P<namespace>[^/]+)/workflows/(?P<workflow_id>.+)/(?P<run_id>[^/]+)/export$",
        export.run_export,
        name="console-run-export",
    ),
    path("namespaces/<str:namespace>/schedules", schedules.schedule_list, name="console-schedules"),
    re_path(
        r"^namespaces/(?P<namespace>[^/]+)/schedules/(?P<schedule_id>.+)/(?P<action>pause|unpause|trigger|backfill)$",
        schedules.schedule_action,
        name="console-schedule-action",
    ),
    re_path(
        r"^namespaces/(?P<namespace>[^/]+)/schedules/(?P<schedule_id>.+)$",
        schedules.schedule_detail,
        name="console-schedule",
    ),
]
