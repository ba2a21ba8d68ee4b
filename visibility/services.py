"""Writes of the visibility app: registering and removing a namespace's custom search attributes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from django.db import IntegrityError, transaction

from tenants.models import Namespace
from visibility import registry
from visibility.models import CustomSearchAttribute
from visibility.search_attributes import (
    LIMITS,
    SYSTEM,
    SaType,
    SearchAttributeError,
    check_new_name,
    type_name,
)


def search_attributes_add(*, namespace: Namespace, attributes: Mapping[str, int]) -> None:
    """Register custom attributes; a name already registered is left as it is (Temporal's behaviour).

    Raises:
        SearchAttributeError: a reserved or malformed name, an unknown type, or more attributes of a
            type than the namespace may have.
    """
    for name in attributes:
        check_new_name(name)
    with transaction.atomic():
        existing = {
            a.name: a.type
            for a in CustomSearchAttribute.objects.select_for_update().filter(namespace=namespace)
        }
        new = {name: t for name, t in attributes.items() if name not in existing}
        counts = Counter(existing.values())
        for t in new.values():
            counts[t] += 1
        for t, n in counts.items():
            limit = LIMITS.get(SaType(t), 0) if t in SaType._value2member_map_ else 0
            if n > limit:
                raise SearchAttributeError(
                    f"Unable to create search attributes: cannot have more than {limit} search attribute "
                    f"of type {type_name(t)}."
                )
        try:
            CustomSearchAttribute.objects.bulk_create(
                [
                    CustomSearchAttribute(namespace=namespace, name=name, type=int(t))
                    for name, t in new.items()
                ]
            )
        except IntegrityError:
            pass  # registered concurrently: the same outcome
    registry.forget(namespace.id)


def search_attributes_remove(*, namespace: Namespace, names: Iterable[str]) -> None:
    """Unregister custom attributes (runs keep their values; filters can no longer name them).

    Raises:
        SearchAttributeError: a system attribute.
    """
    names = list(names)
    system = [n for n in names if n in SYSTEM]
    if system:
        raise SearchAttributeError(f"Unable to remove non-custom search attributes: {', '.join(system)}.")
    CustomSearchAttribute.objects.filter(namespace=namespace, name__in=names).delete()
    registry.forget(namespace.id)
