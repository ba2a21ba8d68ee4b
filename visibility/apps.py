from django.apps import AppConfig


class VisibilityConfig(AppConfig):
    name = "visibility"
    label = "visibility"
    verbose_name = "Visibility (search attributes and list filters)"
