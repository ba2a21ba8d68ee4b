"""Console URLs, shaped as the Temporal UI's so the links people share keep working.

A workflow id may hold slashes, so it is matched greedily up to the run id and `/history`.
"""

from django.urls import path, re_path

from frontend.views import auth, export, home, runs, schedules, workflows
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
