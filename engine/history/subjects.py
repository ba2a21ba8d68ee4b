"""A run's data subject (the `PerduraDataSubject` search attribute), and how children and later runs inherit it.

Pure: the persistence layer seals the payloads of a run with a subject under that subject's key
(engine/persistence/subject_seal.py); these rules only say which subject a run has.
"""

from __future__ import annotations

import json

from temporalio.api.common.v1 import Payload, SearchAttributes

DATA_SUBJECT = "PerduraDataSubject"
"""The predefined Keyword search attribute naming a run's data subject, in every namespace."""
_NAME = DATA_SUBJECT.encode()


def subject_of(search_attributes: bytes) -> str | None:
    """The subject named by a run's serialized search attributes, if any (one substring test when none)."""
    if not search_attributes or _NAME not in search_attributes:
        return None
    payload = SearchAttributes.FromString(search_attributes).indexed_fields.get(DATA_SUBJECT)
    return _value(payload)


def _value(payload: Payload | None) -> str | None:
    if payload is None or not payload.data:
        return None
    try:
        value = json.loads(payload.data)
    except ValueError:
        return None
    return value if isinstance(value, str) and value else None


def inherited(
    parent_search_attributes: bytes, attributes: SearchAttributes | None
) -> SearchAttributes | None:
    """The search attributes of a child or next run: `attributes` (what its command asked for), with the
    parent's subject added when the command names none. A command naming a subject keeps its own."""
    subject = subject_of(parent_search_attributes)
    if subject is None:
        return attributes
    if attributes is not None and _value(attributes.indexed_fields.get(DATA_SUBJECT)) is not None:
        return attributes
    result = SearchAttributes()
    if attributes is not None:
        result.CopyFrom(attributes)
    result.indexed_fields[DATA_SUBJECT].CopyFrom(
        Payload(metadata={"encoding": b"json/plain", "type": b"Keyword"}, data=json.dumps(subject).encode())
    )
    return result


def upsert_keeps_subject(search_attributes: bytes, upsert: SearchAttributes) -> bool:
    """Whether an upsert leaves the run's subject as it is (naming the same one, or not naming it): a
    subject set, changed or removed mid-run would leave some of the run's payloads outside its key."""
    if DATA_SUBJECT not in upsert.indexed_fields:
        return True
    return _value(upsert.indexed_fields[DATA_SUBJECT]) == subject_of(search_attributes)
