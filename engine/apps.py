from django.apps import AppConfig


class EngineConfig(AppConfig):
    name = "engine"
    label = "engine"
    verbose_name = "Durable execution engine"

    def ready(self) -> None:
        import os

        from engine.history import limits

        limits.configure(os.environ)
        # Bind the shared tasks to Perdura's Celery app in every process, not only in the workers: a task
        # sent from a process that never imported it goes to Celery's default app and broker.
        import perdura.celery  # noqa: F401
