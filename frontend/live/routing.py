"""Websocket URLs of the console: `/live` + the page's own path."""

from django.urls import path, re_path

from frontend.live.consumers import BatchConsumer, ListConsumer, RunConsumer

websocket_urlpatterns = [
    path("live/namespaces/<str:namespace>/workflows", ListConsumer.as_asgi()),
    re_path(
        r"^live/namespaces/(?P<namespace>[^/]+)/workflows/(?P<workflow_id>.+)/(?P<run_id>[^/]+)/history$",
        RunConsumer.as_asgi(),
    ),
    re_path(
        r"^live/namespaces/(?P<namespace>[^/]+)/batch-operations/(?P<job_id>.+)$", BatchConsumer.as_asgi()
    ),
]
