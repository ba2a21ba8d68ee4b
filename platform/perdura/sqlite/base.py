"""Django's SQLite backend, with each distinct statement's placeholders converted once.

Django's SQLite cursor rewrites every statement from the "%s" style to SQLite's "?" with a regular
expression on each execute. The engine sends the same few hand-written statements again and again (a
claim, a run's compare-and-swap, its events), and on `perdura dev` that rewrite was about 2% of the
server's CPU under load: here it is remembered per statement text.
"""

from __future__ import annotations

import functools

from django.db.backends.sqlite3 import base


@functools.lru_cache(maxsize=4096)
def _qmark(query: str) -> str:
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


class CursorWrapper(base.SQLiteCursorWrapper):
    def convert_query(self, query: str, *, param_names: list[str] | None = None) -> str:
        if param_names is None:
            return _qmark(query)
        return query % {name: f":{name}" for name in param_names}  # "pyformat" to "named", as Django


class DatabaseWrapper(base.DatabaseWrapper):
    def create_cursor(self, name: str | None = None) -> CursorWrapper:
        return self.connection.cursor(factory=CursorWrapper)
