from django.apps import AppConfig


class EngineConfig(AppConfig):
    name = "engine"
    label = "engine"
    verbose_name = "Durable execution engine"

    def ready(self) -> None:
        import os

        from engine.history import limits

        limits.configure(os.environ)
        # Bind the shared tasks to Perdura's Celery app in every process, not only in the workers: the wake-up
        # hints `perdura api` sends after commit (engine/shards/wakeups.py) went to Celery's default app and its
        # default broker (amqp://localhost) instead of PERDURA_REDIS_URL, so no worker ever heard them and every
        # timer waited for beat's sweep.
        import perdura.celery  # noqa: F401
