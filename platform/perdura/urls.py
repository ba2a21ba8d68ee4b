"""URL routes: health probes, the REST API (tenants/rest), its schema and docs, and the web console (frontend app)."""

from django.contrib.staticfiles.views import serve as static_serve
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from perdura import health

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("api/v1/", include("tenants.rest.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    # The browsable API's few static files, straight from the installed apps (no collectstatic step).
    re_path(r"^static/(?P<path>.*)$", static_serve, {"insecure": True}),
    path("", include("frontend.urls")),
]
