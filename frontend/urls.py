"""Console URLs, shaped as the Temporal UI's so the links people share keep working.

A workflow id may hold slashes, so it is matched greedily up to the run id and `/history`.
"""

from django.urls import path, re_path

from frontend.views import auth, home, runs, workflows

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
]
