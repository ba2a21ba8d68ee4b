"""The SQL visibility records: the table every deployment keeps (the source of truth, whatever the
backend), its writes, and the row codec.

Every run has one row in `visibility_visibilityrecord`, written in the transaction that changes what a
listing shows of the run (engine/persistence/visibility.py); the OpenSearch indexer reads it back
(`SELECT_COLUMNS`, `record_from_row`) to build its documents. Custom attributes live in a JSON
document; those with a slot (visibility.slots) are also copied to a typed slot column.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection as default_connection
from django.db.backends.base.base import BaseDatabaseWrapper

from visibility.backends.base import Record
from visibility.search_attributes import SaType
from visibility.slots import COLUMNS as SLOT_COLUMNS
from visibility.slots import SLOT_TYPES, slot_value

TABLE = "visibility_visibilityrecord"
ARCHIVE_TABLE = "visibility_archivedvisibilityrecord"
"""The archive index (visibility.models.ArchivedVisibilityRecord): the same columns, closed runs only."""
MAX_SORT = 2**63 - 1
"""close_sort of a run that has not closed: open runs come first in the default order."""


RECORD_COLUMNS = (
    "execution_id",
    "namespace_id",
    "workflow_id",
    "run_id",
    "workflow_type",
    "task_queue",
    "status",
    "start_time",
    "execution_time",
    "close_time",
    "close_sort",
    "execution_duration",
    "history_length",
    "history_size_bytes",
    "state_transition_count",
    "parent_workflow_id",
    "parent_run_id",
    "root_workflow_id",
    "root_run_id",
    "first_run_id",
    "memo",
    "search_attributes",
    "custom",
)
SELECT_COLUMNS = tuple(c for c in RECORD_COLUMNS if c != "close_sort")
"""The columns of a Record, in the order `record_from_row` takes them."""


def db_uuid(value: uuid.UUID, connection: BaseDatabaseWrapper) -> uuid.UUID | str:
    """A UUID as the database takes it as a parameter (SQLite keeps them as hex)."""
    return value if connection.features.has_native_uuid_field else value.hex


def json_path(name: str) -> str:
    """SQLite's JSON path of a custom attribute in the `custom` document."""
    return '$."' + name + '"'


def _blob(value: object) -> bytes:
    """A binary column's value (bytes, or a memoryview on Postgres; None or empty when unset)."""
    return bytes(value) if isinstance(value, bytes | memoryview) else b""


def record_from_row(row: Sequence[object]) -> Record:
    """The Record of a row of SELECT_COLUMNS (in that order), as either database returns it."""
    values = dict(zip(SELECT_COLUMNS, row, strict=True))
    custom = values["custom"]
    if isinstance(custom, str):
        custom = json.loads(custom)
    values["custom"] = custom or {}
    values["memo"] = _blob(values["memo"])
    values["search_attributes"] = _blob(values["search_attributes"])
    ns = values["namespace_id"]
    values["namespace_id"] = ns if isinstance(ns, uuid.UUID) else uuid.UUID(str(ns))
    return Record(**values)  # type: ignore[arg-type]  # the columns are the fields, typed by the schema


_SLOT_SQL_TYPES = {
    SaType.Keyword: "text",
    SaType.Int: "bigint",
    SaType.Double: "double precision",
    SaType.Bool: "boolean",
    SaType.Datetime: "bigint",
}
_SLOT_GUARD = (
    "CASE WHEN EXISTS (SELECT 1 FROM visibility_customsearchattribute a "
    "WHERE a.namespace_id = %s AND a.name = %s AND a.slot = %s) THEN {value} END"
)


def _slot_values(
    record: Record, slots: Mapping[str, str], connection: BaseDatabaseWrapper
) -> tuple[list[str], list[Any]]:
    """The placeholders and parameters of every slot column (in SLOT_COLUMNS order) for one record.

    A slot gets its attribute's value only while the attribute still holds that slot in the database
    (checked in the statement): a mapping cached before a RemoveSearchAttributes elsewhere cannot put a
    removed attribute's value into a slot that a later attribute reuses.
    """
    postgres = connection.vendor == "postgresql"
    by_slot = {slot: name for name, slot in slots.items() if slot in SLOT_TYPES}
    placeholders: list[str] = []
    params: list[Any] = []
    for slot in SLOT_COLUMNS:
        name = by_slot.get(slot)
        value = slot_value(slot, record.custom.get(name)) if name is not None else None
        if value is None:
            placeholders.append("NULL")
            continue
        typed = f"CAST(%s AS {_SLOT_SQL_TYPES[SLOT_TYPES[slot]]})" if postgres else "%s"
        placeholders.append(_SLOT_GUARD.format(value=typed))
        params += [db_uuid(record.namespace_id, connection), name, slot, value]
    return placeholders, params


@dataclass(frozen=True, slots=True)
class Upsert:
    """A run's record written (inserted or replaced): as a statement of its own, or as one that writes it only
    where a row of another query (`folded(source)`, e.g. a CTE) exists."""

    columns: str
    values: str
    updates: str
    params: list[Any]

    def statement(self) -> str:
        return f"INSERT INTO {TABLE} ({self.columns}) VALUES ({self.values}) {self.updates}"

    def folded(self, source: str) -> str:
        # INSERT ... SELECT types its parameters from the columns, as VALUES does.
        return f"INSERT INTO {TABLE} ({self.columns}) SELECT {self.values} FROM {source} {self.updates}"


def record_upsert(
    record: Record, connection: BaseDatabaseWrapper | None = None, *, slots: Mapping[str, str] | None = None
) -> Upsert:
    """The write of a run's record (insert or replace), for the caller's transaction.

    Args:
        record: the record.
        connection: the database (the default one unless given).
        slots: the namespace's slot column of each custom attribute that has one, by name
            (visibility.registry); the slot columns of the others are cleared.
    """
    connection = connection or default_connection
    custom = "CAST(%s AS jsonb)" if connection.vendor == "postgresql" else "%s"
    slot_placeholders, slot_params = _slot_values(record, slots or {}, connection)
    placeholders = ", ".join(
        [*(custom if c == "custom" else "%s" for c in RECORD_COLUMNS), *slot_placeholders]
    )
    columns = (*RECORD_COLUMNS, *SLOT_COLUMNS)
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns[1:])
    params = [
        record.execution_id,
        db_uuid(record.namespace_id, connection),
        record.workflow_id,
        record.run_id,
        record.workflow_type,
        record.task_queue,
        record.status,
        record.start_time,
        record.execution_time,
        record.close_time,
        record.close_time if record.close_time is not None else MAX_SORT,
        record.execution_duration,
        record.history_length,
        record.history_size_bytes,
        record.state_transition_count,
        record.parent_workflow_id,
        record.parent_run_id,
        record.root_workflow_id,
        record.root_run_id,
        record.first_run_id,
        record.memo,
        record.search_attributes,
        json.dumps(record.custom, separators=(",", ":")),
        *slot_params,
    ]
    return Upsert(
        columns=", ".join(columns),
        values=placeholders,
        updates=f"ON CONFLICT (execution_id) DO UPDATE SET {updates}",
        params=params,
    )


def record_upsert_txn(
    record: Record, connection: BaseDatabaseWrapper | None = None, *, slots: Mapping[str, str] | None = None
) -> None:
    """Write a run's record (insert or replace), inside the caller's transaction (see `record_upsert`)."""
    upsert = record_upsert(record, connection, slots=slots)
    with (connection or default_connection).cursor() as cursor:
        cursor.execute(upsert.statement(), upsert.params)


# A slot's value from the JSON document, NULL unless the stored JSON value has the slot's type (a name
# registered again with another type may still hold values of the old one). Parameters: the name
# (Postgres) or its JSON path (SQLite), once per placeholder.
_FROM_JSON_POSTGRES = {
    SaType.Keyword: "CASE WHEN jsonb_typeof(custom -> %s) = 'string' THEN custom ->> %s END",
    SaType.Bool: "CASE WHEN jsonb_typeof(custom -> %s) = 'boolean' THEN (custom ->> %s)::boolean END",
    SaType.Double: (
        "CASE WHEN jsonb_typeof(custom -> %s) = 'number' THEN CASE WHEN abs((custom ->> %s)::numeric) < 1e300 "
        "THEN (custom ->> %s)::double precision END END"
    ),
    SaType.Int: (
        "CASE WHEN jsonb_typeof(custom -> %s) = 'number' THEN CASE WHEN scale((custom ->> %s)::numeric) = 0 "
        "AND (custom ->> %s)::numeric BETWEEN -9223372036854775808 AND 9223372036854775807 "
        "THEN (custom ->> %s)::bigint END END"
    ),
}
_FROM_JSON_POSTGRES[SaType.Datetime] = _FROM_JSON_POSTGRES[SaType.Int]
_FROM_JSON_SQLITE = {
    SaType.Keyword: "CASE WHEN json_type(custom, %s) = 'text' THEN json_extract(custom, %s) END",
    SaType.Bool: "CASE json_type(custom, %s) WHEN 'true' THEN 1 WHEN 'false' THEN 0 END",
    SaType.Double: (
        "CASE WHEN json_type(custom, %s) IN ('integer', 'real') THEN CAST(json_extract(custom, %s) AS REAL) END"
    ),
    SaType.Int: "CASE WHEN json_type(custom, %s) = 'integer' THEN json_extract(custom, %s) END",
}
_FROM_JSON_SQLITE[SaType.Datetime] = _FROM_JSON_SQLITE[SaType.Int]


def slots_fill_txn(
    namespace_id: uuid.UUID, slots: Mapping[str, str], connection: BaseDatabaseWrapper | None = None
) -> int:
    """Set slot columns of every record of a namespace (live and archived) from the JSON documents,
    inside the caller's transaction: each slot to its attribute's value there, or NULL where the record
    has none.

    One statement for all the slots, so no record is rewritten twice. Returns how many records changed.

    Args:
        namespace_id: the namespace.
        slots: the slot of each attribute, by name.

    Raises:
        ValueError: not a slot column.
    """
    connection = connection or default_connection
    postgres = connection.vendor == "postgresql"
    sets: list[str] = []
    wheres: list[str] = []
    params: list[Any] = []
    where_params: list[Any] = []
    for name, slot in slots.items():
        if slot not in SLOT_TYPES:
            raise ValueError(f"not a slot column: {slot!r}")
        value = (_FROM_JSON_POSTGRES if postgres else _FROM_JSON_SQLITE)[SLOT_TYPES[slot]]
        key = name if postgres else json_path(name)
        sets.append(f"{slot} = {value}")
        params += [key] * value.count("%s")
        present = "(custom -> %s) IS NOT NULL" if postgres else "json_type(custom, %s) IS NOT NULL"
        wheres += [f"{slot} IS NOT NULL", present]
        where_params.append(key)
    if not sets:
        return 0
    changed = 0
    with connection.cursor() as cursor:
        for table in (TABLE, ARCHIVE_TABLE):
            cursor.execute(
                f"UPDATE {table} SET {', '.join(sets)} WHERE namespace_id = %s AND ({' OR '.join(wheres)})",
                [*params, db_uuid(namespace_id, connection), *where_params],
            )
            changed += int(cursor.rowcount)
    return changed


def slot_clear_txn(namespace_id: uuid.UUID, slot: str, connection: BaseDatabaseWrapper | None = None) -> int:
    """Empty one slot column in every record of a namespace (live and archived), inside the caller's
    transaction; how many.

    Raises:
        ValueError: not a slot column.
    """
    if slot not in SLOT_TYPES:
        raise ValueError(f"not a slot column: {slot!r}")
    connection = connection or default_connection
    cleared = 0
    with connection.cursor() as cursor:
        for table in (TABLE, ARCHIVE_TABLE):
            cursor.execute(
                f"UPDATE {table} SET {slot} = NULL WHERE namespace_id = %s AND {slot} IS NOT NULL",
                [db_uuid(namespace_id, connection)],
            )
            cleared += int(cursor.rowcount)
    return cleared


def archive_copy_txn(execution_id: int, uri: str, connection: BaseDatabaseWrapper | None = None) -> None:
    """Copy a closed run's live record into the archive index (replacing an earlier copy), inside the
    caller's transaction: the record as it is, memo still sealed, slot columns as they are."""
    connection = connection or default_connection
    columns = ", ".join((*RECORD_COLUMNS, *SLOT_COLUMNS))
    updates = ", ".join(f"{c} = excluded.{c}" for c in (*RECORD_COLUMNS[1:], *SLOT_COLUMNS, "uri"))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {ARCHIVE_TABLE} ({columns}, uri) SELECT {columns}, %s FROM {TABLE} "
            f"WHERE execution_id = %s ON CONFLICT (execution_id) DO UPDATE SET {updates}",
            [uri, execution_id],
        )
