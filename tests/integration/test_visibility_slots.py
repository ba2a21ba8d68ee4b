"""Slot columns of custom attributes: assignment, exhaustion, removal and reuse (Postgres).

AddSearchAttributes gives each new Keyword/Int/Double/Bool/Datetime attribute the lowest free slot of
its type; RemoveSearchAttributes frees and empties it; filters read the slot and answer as the JSON
document would.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest
from django.db import connection

from tenants.models import Namespace
from tenants.services.namespaces import namespace_ensure
from tests.integration.test_visibility_sql import _blank, _isolated, _to_record
from visibility import registry, selectors, services, slots
from visibility.backends.sql import backend as sql_backend
from visibility.backends.sql import compiler as sql_compiler
from visibility.backends.sql import records as sql_records
from visibility.models import CustomSearchAttribute
from visibility.query.parser import parse
from visibility.query.resolve import resolve
from visibility.search_attributes import SaType

pytestmark = pytest.mark.django_db

KEYWORD, INT, DOUBLE, BOOL, DATETIME, TEXT, LIST = (
    SaType.Keyword,
    SaType.Int,
    SaType.Double,
    SaType.Bool,
    SaType.Datetime,
    SaType.Text,
    SaType.KeywordList,
)


@pytest.fixture(autouse=True)
def _rolled_back(db) -> Iterator[None]:
    """Each test in a savepoint rolled back at its end: the records' runs do not exist."""
    with _isolated(connection):
        yield


@pytest.fixture
def namespace() -> Namespace:
    return namespace_ensure(name=f"slots-{uuid.uuid4().hex[:8]}")


def _slots(namespace: Namespace) -> dict[str, str | None]:
    return dict(CustomSearchAttribute.objects.filter(namespace=namespace).values_list("name", "slot"))


def _write(namespace: Namespace, custom: dict[str, object], *, cached: dict[str, str] | None = None) -> int:
    """Write a record as the run's transaction does (slots from the registry unless `cached` is given)."""
    record = replace(_to_record(namespace.id, _blank()), custom=custom)
    mapping = registry.custom_attributes(namespace.id).slots if cached is None else cached
    sql_records.record_upsert_txn(record, slots=mapping)
    return record.execution_id


def _column(execution_id: int, slot: str) -> object:
    assert slot in slots.SLOT_TYPES
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {slot} FROM {sql_records.TABLE} WHERE execution_id = %s", [execution_id])
        return cursor.fetchone()[0]


def _count(namespace: Namespace, text: str) -> int:
    return selectors.execution_count(namespace_id=namespace.id, query=text)[0]


def test_add_gives_the_lowest_free_slot_of_each_type(namespace) -> None:
    """Slots are per type and per namespace, in registration order; Text and KeywordList get none."""
    services.search_attributes_add(
        namespace=namespace,
        attributes={"A": KEYWORD, "N": INT, "T": TEXT, "L": LIST, "D": DOUBLE, "F": BOOL, "W": DATETIME},
    )
    services.search_attributes_add(namespace=namespace, attributes={"B": KEYWORD, "M": INT})
    assert _slots(namespace) == {
        "A": "keyword01",
        "B": "keyword02",
        "N": "int01",
        "M": "int02",
        "D": "double01",
        "F": "bool01",
        "W": "datetime01",
        "T": None,
        "L": None,
    }
    other = namespace_ensure(name=f"slots-{uuid.uuid4().hex[:8]}")
    services.search_attributes_add(namespace=other, attributes={"Z": KEYWORD})
    assert _slots(other) == {"Z": "keyword01"}
    # A freed slot is the lowest free one again.
    services.search_attributes_remove(namespace=namespace, names=["A"])
    services.search_attributes_add(namespace=namespace, attributes={"C": KEYWORD, "A": INT})
    assert _slots(namespace)["C"] == "keyword01"
    assert _slots(namespace)["A"] == "int03"


def test_the_limits_fill_every_slot(namespace) -> None:
    """At the per-type limits every scalar attribute still has a slot: one attribute each, no sharing."""
    attributes = {f"{t.name}{i}": t for t, names in slots.SLOTS.items() for i in range(len(names))}
    services.search_attributes_add(namespace=namespace, attributes=attributes)
    assigned = _slots(namespace)
    assert sorted(assigned.values()) == sorted(slots.COLUMNS)  # type: ignore[type-var]  # slots are str | None in general; every one is set here


def test_without_a_free_slot_an_attribute_works_through_the_json_document(namespace, monkeypatch) -> None:
    """Slots exhausted: the attribute gets none, and filters on it still answer (unindexed)."""
    monkeypatch.setitem(slots.SLOTS, SaType.Keyword, ("keyword01",))
    services.search_attributes_add(namespace=namespace, attributes={"A": KEYWORD, "B": KEYWORD})
    assert _slots(namespace) == {"A": "keyword01", "B": None}
    first = _write(namespace, {"A": "x", "B": "y"})
    _write(namespace, {"A": "y"})
    _write(namespace, {"B": "x"})
    assert _column(first, "keyword01") == "x"
    assert _count(namespace, "A = 'x'") == 1
    assert _count(namespace, "B = 'x'") == 1
    assert _count(namespace, "B != 'x'") == 1
    assert _count(namespace, "A = 'y' OR B = 'y'") == 2
    assert _count(namespace, "A IS NULL") == 1
    page, _ = selectors.execution_list(
        namespace_id=namespace.id, query="A = 'x' AND B = 'y'", page_size=5, page_token=b""
    )
    assert [r.execution_id for r in page] == [first]


def test_remove_empties_the_slot_and_a_later_attribute_never_sees_old_values(namespace) -> None:
    services.search_attributes_add(namespace=namespace, attributes={"A": KEYWORD, "N": INT})
    old = _write(namespace, {"A": "x", "N": 5})
    assert (_column(old, "keyword01"), _column(old, "int01")) == ("x", 5)
    services.search_attributes_remove(namespace=namespace, names=["A"])
    assert _column(old, "keyword01") is None
    assert _column(old, "int01") == 5  # the other attributes keep theirs
    services.search_attributes_add(namespace=namespace, attributes={"B": KEYWORD})
    assert _slots(namespace)["B"] == "keyword01"
    assert _count(namespace, "B = 'x'") == 0
    assert _count(namespace, "B IS NOT NULL") == 0
    # A writer whose cache still maps A to keyword01 (another process, within its 5 s) writes no value.
    stale = _write(namespace, {"A": "x", "N": 6}, cached={"A": "keyword01", "N": "int01"})
    assert _column(stale, "keyword01") is None
    assert _column(stale, "int01") == 6
    assert _count(namespace, "B = 'x'") == 0
    new = _write(namespace, {"B": "x"})
    assert _column(new, "keyword01") == "x"
    assert _count(namespace, "B = 'x'") == 1


def test_a_name_registered_again_finds_the_values_runs_kept(namespace) -> None:
    """As with the JSON document alone: runs keep a removed attribute's value, and it counts again once
    the name is back (of the same type); a value of the old type does not fit the new one."""
    services.search_attributes_add(namespace=namespace, attributes={"A": KEYWORD, "N": INT})
    kept = _write(namespace, {"A": "x", "N": 7})
    services.search_attributes_remove(namespace=namespace, names=["A", "N"])
    services.search_attributes_add(namespace=namespace, attributes={"N": KEYWORD, "A": KEYWORD})
    assert _slots(namespace) == {"N": "keyword01", "A": "keyword02"}
    assert _column(kept, "keyword02") == "x"
    assert _column(kept, "keyword01") is None  # 7 is no Keyword
    assert _count(namespace, "A = 'x'") == 1
    unslotted = resolve(parse("A = 'x'"), {"A": KEYWORD, "N": KEYWORD}, count=True)
    assert sql_backend.count_records(namespace.id, unslotted)[0] == 1


def test_rewriting_a_record_keeps_its_slots_in_step(namespace) -> None:
    """An upsert that drops or changes a value updates the slot (the record is replaced whole)."""
    services.search_attributes_add(namespace=namespace, attributes={"A": KEYWORD, "W": DATETIME, "F": BOOL})
    record = replace(_to_record(namespace.id, _blank()), custom={"A": "x", "W": 1_000, "F": True})
    mapping = registry.custom_attributes(namespace.id).slots
    sql_records.record_upsert_txn(record, slots=mapping)
    assert (_column(record.execution_id, "datetime01"), _column(record.execution_id, "bool01")) == (
        1_000,
        True,
    )
    sql_records.record_upsert_txn(replace(record, custom={"A": "y"}), slots=mapping)
    assert _column(record.execution_id, "keyword01") == "y"
    assert _column(record.execution_id, "datetime01") is None
    assert _column(record.execution_id, "bool01") is None


def test_filters_read_the_slot_column() -> None:
    """A slotted attribute compiles to its column (parameterised), an unslotted one to the JSON document;
    a slot of another type than the attribute's is ignored."""
    ns = uuid.uuid4()
    custom = {"A": KEYWORD, "N": INT}
    slotted = sql_compiler.compile_filter(
        ns, resolve(parse("A = 'x' AND N > 3"), custom, count=False, slots={"A": "keyword04", "N": "int02"})
    )
    assert "v.keyword04 = %s" in slotted.where
    assert "v.int02 > %s" in slotted.where
    assert "custom" not in slotted.where
    assert "x" in slotted.params
    wrong_type = resolve(parse("N = 3"), custom, count=False, slots={"N": "keyword01"})
    assert "custom" in sql_compiler.compile_filter(ns, wrong_type).where
    # Only names of the fixed list ever reach the SQL, whatever an AST carries.
    forged = resolve(parse("A = 'x'"), custom, count=False)
    assert forged.where is not None
    forged = replace(forged, where=replace(forged.where, attr=replace(forged.where.attr, slot="custom; --")))  # type: ignore[arg-type]  # a forged slot name is what this test sends
    assert "custom; --" not in sql_compiler.compile_filter(ns, forged).where
