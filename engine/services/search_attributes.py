"""Search attributes a start, schedule or workflow task brings: checked against the namespace's registry, and typed."""

from __future__ import annotations

from collections.abc import Iterable

from temporalio.api.command.v1 import Command
from temporalio.api.common.v1 import SearchAttributes
from temporalio.api.enums.v1 import CommandType

from engine.errors import InvalidArgument, Unavailable
from tenants.models import Namespace
from visibility import registry
from visibility.backends.base import BackendUnavailable
from visibility.search_attributes import SYSTEM, SaType, SearchAttributeError, validate

_COMMAND_FIELDS = {
    CommandType.COMMAND_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: (
        "upsert_workflow_search_attributes_command_attributes"
    ),
    CommandType.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION: "start_child_workflow_execution_command_attributes",
    CommandType.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION: (
        "continue_as_new_workflow_execution_command_attributes"
    ),
}
"""The commands that carry search attributes, and the field holding them."""


def apply_types(attrs: SearchAttributes, custom: dict[str, SaType]) -> None:
    """Give each value without a type header its registered type, in place (Temporal's ApplyTypeMap)."""
    for name, payload in attrs.indexed_fields.items():
        t = SYSTEM.get(name) or custom.get(name)
        if t is not None and "type" not in payload.metadata:
            payload.metadata["type"] = t.name.encode()


def search_attributes_check(*, namespace: Namespace, attrs: SearchAttributes) -> None:
    """Check `attrs` against the namespace's registered attributes, and type the untyped values in place
    (so the history records each value with its type and workers decode legacy values as registered).

    Raises:
        InvalidArgument: an unknown attribute or a value of the wrong type.
        Unavailable: the visibility backend cannot be read.
    """
    try:
        custom = registry.custom_types(namespace.id, names=list(attrs.indexed_fields))
        validate(attrs, custom, namespace=namespace.name)
    except SearchAttributeError as e:
        raise InvalidArgument(str(e)) from None
    except BackendUnavailable as e:
        raise Unavailable(str(e)) from None
    apply_types(attrs, custom)


def commands_check(*, namespace: Namespace, commands: Iterable[Command]) -> None:
    """Check (and type) the search attributes of the commands that carry them, as a start's are.

    Raises:
        InvalidArgument: a command's search attributes are bad.
        Unavailable: the visibility backend cannot be read.
    """
    for command in commands:
        field = _COMMAND_FIELDS.get(command.command_type)
        if field is None:
            continue
        attrs = getattr(command, field).search_attributes
        if attrs.indexed_fields:
            search_attributes_check(namespace=namespace, attrs=attrs)
