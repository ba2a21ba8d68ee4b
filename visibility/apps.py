from django.apps import AppConfig
from django.db.backends.base.base import BaseDatabaseWrapper


class VisibilityConfig(AppConfig):
    name = "visibility"
    label = "visibility"
    verbose_name = "Visibility (search attributes and list filters)"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        connection_created.connect(_sqlite_functions, dispatch_uid="visibility-sqlite-functions")


def _sqlite_functions(sender: object, connection: BaseDatabaseWrapper, **kwargs: object) -> None:
    """SQLite has no word matching for Text filters: lend it the in-memory evaluator's."""
    if connection.vendor != "sqlite":
        return
    from visibility.query.memory import text_match

    def match(value: object, query: object) -> int | None:
        if value is None or query is None:
            return None
        return int(text_match(str(value), str(query)))

    connection.connection.create_function("perdura_text_match", 2, match, deterministic=True)
