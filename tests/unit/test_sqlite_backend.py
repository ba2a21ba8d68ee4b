"""`perdura dev`'s SQLite backend (perdura/sqlite): Django's placeholder rewrite, remembered per statement."""

from __future__ import annotations

from django.conf import settings
from perdura.sqlite import base


def test_format_placeholders_become_qmarks_and_escaped_percents_stay_percents():
    assert base._qmark("SELECT a FROM t WHERE b = %s AND c LIKE '%%x' AND d IN (%s, %s)") == (
        "SELECT a FROM t WHERE b = ? AND c LIKE '%x' AND d IN (?, ?)"
    )


def test_named_placeholders_are_converted_as_django_does():
    cursor = base.CursorWrapper.__new__(base.CursorWrapper)
    assert cursor.convert_query("SELECT %(a)s, %(b)s", param_names=["a", "b"]) == "SELECT :a, :b"


def test_a_sqlite_database_url_selects_this_backend(monkeypatch):
    from perdura import settings as perdura_settings

    monkeypatch.setenv("PERDURA_DATABASE_URL", "sqlite:////tmp/perdura-backend-test.sqlite3")
    assert perdura_settings._database()["ENGINE"] == "perdura.sqlite"
    assert settings.DATABASES  # the suite's own settings are untouched
