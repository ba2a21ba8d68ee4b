"""Model instances from hand-written SELECTs on the hot path, without the ORM's per-query work.

`Model.objects.raw()` resolves the result's columns against the model, picks converters and orders the
fields anew for every query: more CPU than a one-row read by primary key costs the database. Here that
work is done once per model, and a row is converted and built as the ORM's own compiler would.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from django.db import connection, models

M = TypeVar("M", bound=models.Model)

_Converter = tuple[int, list[Callable[..., Any]], Any]


@functools.cache
def _shape(model: type[models.Model], vendor: str) -> tuple[int, tuple[_Converter, ...]]:
    """How many columns the model has, and the converters (with their expression) of each that needs one."""
    del vendor  # part of the cache key: converters are the backend's
    fields = model._meta.concrete_fields
    converters = []
    for index, field in enumerate(fields):
        column = field.get_col(model._meta.db_table)
        # get_db_converters is what the ORM's compiler asks of a field (missing from the type stubs).
        found = connection.ops.get_db_converters(column) + cast(Any, field).get_db_converters(connection)
        if found:
            converters.append((index, found, column))
    return len(fields), tuple(converters)


@functools.cache
def columns(model: type[models.Model], alias: str = "") -> str:
    """The model's columns in field order, for a SELECT list (`alias.` before each when given)."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + connection.ops.quote_name(f.column) for f in model._meta.concrete_fields)


def instance(model: type[M], row: Sequence[Any]) -> M:
    """The model instance of a row whose first values are `columns(model)`; later values are ignored."""
    count, converters = _shape(model, connection.vendor)
    values = list(row[:count])
    for index, found, expression in converters:
        value = values[index]
        for converter in found:
            value = converter(value, expression, connection)
        values[index] = value
    return model.from_db(connection.alias, (), values)


def fetch(model: type[M], sql: str, params: Sequence[Any]) -> list[M]:
    """Instances of the rows `sql` selects (its list starting with `columns(model, ...)`)."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [instance(model, row) for row in cursor.fetchall()]
