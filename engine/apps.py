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
        # hints `perdura api` sends after commit (engine/tasks.py) went to Celery's default app and its
        # default broker (amqp://localhost) instead of PERDURA_REDIS_URL, so no worker ever heard them and every
        # timer waited for beat's sweep.
        import perdura.celery  # noqa: F401
        from django.conf import settings

        if getattr(settings, "PERDURA_TIMER_WAKEUPS", "") == "celery":
            # Shard workers fire timers: new shard rows reach them as ShardDue hints (engine/notify.py).
            from engine import notify, tasks

            notify.on_shard_due(tasks.send_shard_due)
