"""Typed slot columns of the visibility record: which exist, which a new attribute gets, what they hold.

As in Temporal's SQL visibility (Keyword01..10, Int01..03, ...), each namespace's custom attributes of
the indexable scalar types are mapped onto a fixed set of typed columns of the record, each with a
partial B-tree index in the default order (visibility.models). The mapping is kept per attribute
(`CustomSearchAttribute.slot`) and cached with the types (visibility.registry). An attribute without a
slot (Text, KeywordList, or every slot of its type taken) is filtered through the JSON document alone.

Slot names are this fixed whitelist: they are the only column names filters and writes take from the
mapping, never from user text.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Collection, Mapping

from visibility.search_attributes import SaType

SLOTS: dict[SaType, tuple[str, ...]] = {
    SaType.Keyword: tuple(f"keyword{i:02d}" for i in range(1, 11)),
    SaType.Int: ("int01", "int02", "int03"),
    SaType.Double: ("double01", "double02", "double03"),
    SaType.Bool: ("bool01", "bool02", "bool03"),
    SaType.Datetime: ("datetime01", "datetime02", "datetime03"),
}
"""The slot columns of each type, in the order they are handed out (Temporal's SQL counts)."""

COLUMNS: tuple[str, ...] = tuple(slot for slots in SLOTS.values() for slot in slots)
SLOT_TYPES: dict[str, SaType] = {slot: t for t, slots in SLOTS.items() for slot in slots}

_INT64 = (-(2**63), 2**63 - 1)


def free_slot(t: int, taken: Collection[str]) -> str | None:
    """The first slot of type `t` not in `taken`; None when the type has no slots or all are taken."""
    for slot in SLOTS.get(SaType(t), ()) if t in SaType._value2member_map_ else ():
        if slot not in taken:
            return slot
    return None


def slot_of(name: str, t: SaType, slots: Mapping[str, str]) -> str | None:
    """The slot holding attribute `name` of type `t`, if the mapping gives it one of that type."""
    slot = slots.get(name)
    return slot if slot is not None and SLOT_TYPES.get(slot) == t else None


def slot_value(slot: str, value: object) -> object:
    """The value to store in `slot` for a stored attribute value; None when it does not fit the slot.

    Stored values come typed (visibility.search_attributes.decode_value); this only refuses what a
    slot's SQL type cannot hold, so a slot never disagrees with the JSON document it mirrors.
    """
    t = SLOT_TYPES[slot]
    if t == SaType.Keyword:
        return value if isinstance(value, str) else None
    if t == SaType.Bool:
        return value if isinstance(value, bool) else None
    if t == SaType.Double:
        if isinstance(value, int | float) and not isinstance(value, bool):
            with contextlib.suppress(OverflowError):
                number = float(value)
                return number if math.isfinite(number) else None
        return None
    # Int and Datetime (microseconds): a bigint.
    if isinstance(value, int) and not isinstance(value, bool) and _INT64[0] <= value <= _INT64[1]:
        return value
    return None
