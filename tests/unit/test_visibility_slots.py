"""The slot columns' whitelist, assignment order and value checks, and the model that declares them."""

from __future__ import annotations

import pytest

from visibility import slots
from visibility.models import VisibilityRecord
from visibility.search_attributes import SaType


def test_slot_counts_are_temporals_and_match_the_limits() -> None:
    """10 Keyword, 3 each of Int, Double, Bool, Datetime: every attribute within the limits gets one."""
    assert {t: len(s) for t, s in slots.SLOTS.items()} == {
        SaType.Keyword: 10,
        SaType.Int: 3,
        SaType.Double: 3,
        SaType.Bool: 3,
        SaType.Datetime: 3,
    }
    assert len(set(slots.COLUMNS)) == 22


def test_the_model_has_a_typed_column_and_a_partial_index_per_slot() -> None:
    fields = {f.name: f for f in VisibilityRecord._meta.get_fields()}
    kinds = {
        SaType.Keyword: "TextField",
        SaType.Int: "BigIntegerField",
        SaType.Double: "FloatField",
        SaType.Bool: "BooleanField",
        SaType.Datetime: "BigIntegerField",
    }
    indexes = {i.name: i for i in VisibilityRecord._meta.indexes}
    for slot, t in slots.SLOT_TYPES.items():
        assert fields[slot].null
        assert fields[slot].get_internal_type() == kinds[t]
        index = indexes[f"vis_slot_{slot}"]
        assert index.fields == ["namespace", slot, "-close_sort", "-start_time", "-execution"]
        assert index.condition is not None


def test_free_slot_takes_the_lowest_free_of_the_type() -> None:
    assert slots.free_slot(SaType.Keyword, set()) == "keyword01"
    assert slots.free_slot(SaType.Keyword, {"keyword01", "keyword03", "int01"}) == "keyword02"
    assert slots.free_slot(SaType.Int, {"int01", "int02", "int03"}) is None
    assert slots.free_slot(SaType.Text, set()) is None
    assert slots.free_slot(SaType.KeywordList, set()) is None
    assert slots.free_slot(99, set()) is None


@pytest.mark.parametrize(
    ("slot", "value", "stored"),
    [
        ("keyword01", "x", "x"),
        ("keyword01", 5, None),
        ("int01", 5, 5),
        ("int01", True, None),
        ("int01", 2**63, None),
        ("int01", 1.0, None),
        ("double01", 1.5, 1.5),
        ("double01", 2, 2.0),
        ("double01", float("inf"), None),
        ("double01", 10**400, None),
        ("bool01", False, False),
        ("bool01", 0, None),
        ("datetime01", 1_767_225_600_000_000, 1_767_225_600_000_000),
        ("datetime01", "2026-01-01T00:00:00Z", None),
        ("keyword01", None, None),
    ],
)
def test_slot_value_keeps_only_what_the_column_type_holds(slot: str, value: object, stored: object) -> None:
    assert slots.slot_value(slot, value) == stored
    assert type(slots.slot_value(slot, value)) is type(stored)


def test_slot_of_needs_a_slot_of_the_attributes_type() -> None:
    mapping = {"A": "keyword02", "N": "keyword03", "X": "nonsense"}
    assert slots.slot_of("A", SaType.Keyword, mapping) == "keyword02"
    assert slots.slot_of("N", SaType.Int, mapping) is None
    assert slots.slot_of("X", SaType.Keyword, mapping) is None
    assert slots.slot_of("Missing", SaType.Keyword, mapping) is None
