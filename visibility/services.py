"""Writes of the visibility app: registering and removing a namespace's custom search attributes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from django.db import transaction

from tenants.models import Namespace
from visibility import registry, slots
from visibility.backends.sql import records
from visibility.models import CustomSearchAttribute
from visibility.search_attributes import (
    LIMITS,
    SYSTEM,
    SaType,
    SearchAttributeError,
    check_new_name,
    type_name,
)


def _lock(namespace: Namespace) -> None:
    # Registrations of one namespace one at a time, so two cannot take the same slot. NO KEY UPDATE:
    # the runs being written meanwhile only KEY SHARE the namespace row (their foreign keys).
    Namespace.objects.select_for_update(no_key=True).filter(pk=namespace.pk).first()


def search_attributes_add(*, namespace: Namespace, attributes: Mapping[str, int]) -> None:
    """Register custom attributes; a name already registered is left as it is (Temporal's behaviour).

    Each new attribute of a type with slot columns gets the lowest slot of its type the namespace
    does not use (visibility.slots); with none free it works all the same, through the JSON document,
    unindexed.

    Raises:
        SearchAttributeError: a reserved or malformed name, an unknown type, or more attributes of a
            type than the namespace may have.
    """
    for name in attributes:
        check_new_name(name)
    with transaction.atomic():
        _lock(namespace)
        existing = {
            a.name: (a.type, a.slot)
            for a in CustomSearchAttribute.objects.select_for_update().filter(namespace=namespace)
        }
        new = {name: t for name, t in attributes.items() if name not in existing}
        counts = Counter(t for t, _ in existing.values())
        for t in new.values():
            counts[t] += 1
        for t, n in counts.items():
            limit = LIMITS.get(SaType(t), 0) if t in SaType._value2member_map_ else 0
            if n > limit:
                raise SearchAttributeError(
                    f"Unable to create search attributes: cannot have more than {limit} search attribute "
                    f"of type {type_name(t)}."
                )
        taken = {slot for _, slot in existing.values() if slot is not None}
        assigned: dict[str, str] = {}
        rows = []
        for name, t in new.items():
            slot = slots.free_slot(t, taken)
            if slot is not None:
                taken.add(slot)
                assigned[name] = slot
            rows.append(CustomSearchAttribute(namespace=namespace, name=name, type=int(t), slot=slot))
        CustomSearchAttribute.objects.bulk_create(rows)
        # A new slot mirrors the JSON documents: the values runs kept from an earlier registration of
        # the name (which filters on the JSON would find), and nothing of the slot's previous attribute
        # (emptied at its removal; this also drops a value committed while that removal ran).
        records.slots_fill_txn(namespace.id, assigned)
    registry.forget(namespace.id)


def search_attributes_remove(*, namespace: Namespace, names: Iterable[str]) -> None:
    """Unregister custom attributes (runs keep their values; filters can no longer name them).

    An attribute's slot is freed and emptied in every record of the namespace in the same transaction,
    so an attribute that takes the slot later never sees these values. (The JSON documents keep them,
    as before: the same name registered again finds them.)

    Raises:
        SearchAttributeError: a system attribute.
    """
    names = list(names)
    system = [n for n in names if n in SYSTEM]
    if system:
        raise SearchAttributeError(f"Unable to remove non-custom search attributes: {', '.join(system)}.")
    with transaction.atomic():
        _lock(namespace)
        removed = CustomSearchAttribute.objects.select_for_update().filter(
            namespace=namespace, name__in=names
        )
        freed = [slot for slot in removed.values_list("slot", flat=True) if slot is not None]
        # The rows go first: a run written meanwhile re-checks its slots against them, and so writes
        # no value into a slot once this commits.
        removed.delete()
        for slot in freed:
            records.slot_clear_txn(namespace.id, slot)
    registry.forget(namespace.id)
