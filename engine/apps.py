from django.apps import AppConfig


class EngineConfig(AppConfig):
    name = "engine"
    label = "engine"
    verbose_name = "Durable execution engine"

    def ready(self) -> None:
        import os

        from engine.history import limits

        limits.configure(os.environ)
