"""URL routes: the web console lives in the frontend app."""

from django.urls import include, path

urlpatterns = [path("", include("frontend.urls"))]
