from django.apps import AppConfig


class EngineConfig(AppConfig):
    name = "engine"
    label = "engine"
    verbose_name = "Durable execution engine"
