"""OpenSearch documents: the index template, a run's document, and the Record a search hit holds.

One index (behind an alias) holds every namespace's runs; each document carries its namespace. Custom
attributes are namespaced by type rather than by namespace: `Custom.<Type>.<name>` (a dynamic template
maps each type), so two namespaces may give one name different types without a mapping conflict, and
adding an attribute needs no mapping change. Times are microseconds since the epoch in `long` fields,
as in the SQL record, so both backends compare and order the same values exactly.

Documents are written by the shard workers from transfer rows (engine/shards/visibility_index.py),
with the run's `db_version` as external version: OpenSearch keeps the highest, so a late, older
update never overwrites a newer one.
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Mapping
from typing import Any

from visibility.backends.base import Record
from visibility.query.memory import text_tokens
from visibility.search_attributes import SaType

TEMPLATE_VERSION = 1
OPEN_SORT = 2**53 - 1
"""CloseSort of a run that has not closed (past every close time; exact even where JSON numbers are doubles)."""


# System attributes: the record's columns, under Temporal's names.
FIELDS = {
    "execution_id": "ExecutionId",
    "namespace_id": "NamespaceId",
    "workflow_id": "WorkflowId",
    "run_id": "RunId",
    "workflow_type": "WorkflowType",
    "task_queue": "TaskQueue",
    "status": "ExecutionStatus",
    "start_time": "StartTime",
    "execution_time": "ExecutionTime",
    "close_time": "CloseTime",
    "execution_duration": "ExecutionDuration",
    "history_length": "HistoryLength",
    "history_size_bytes": "HistorySizeBytes",
    "state_transition_count": "StateTransitionCount",
    "parent_workflow_id": "ParentWorkflowId",
    "parent_run_id": "ParentRunId",
    "root_workflow_id": "RootWorkflowId",
    "root_run_id": "RootRunId",
    "first_run_id": "FirstRunId",
}
_LONGS = {
    "ExecutionId",
    "StartTime",
    "ExecutionTime",
    "CloseTime",
    "CloseSort",
    "ExecutionDuration",
    "HistoryLength",
    "HistorySizeBytes",
    "StateTransitionCount",
}
CUSTOM_TYPES = {
    SaType.Keyword: {"type": "keyword"},
    SaType.KeywordList: {"type": "keyword"},
    SaType.Text: {"type": "text", "analyzer": "perdura_words"},
    SaType.Int: {"type": "long"},
    SaType.Double: {"type": "double"},
    SaType.Bool: {"type": "boolean"},
    SaType.Datetime: {"type": "long"},
}


def template_body(index: str, *, shards: int = 1, replicas: int = 1) -> dict[str, Any]:
    """The composable index template of `index-*` indices (see the README for the reasoning)."""
    properties: dict[str, Any] = {
        name: {"type": "long"} if name in _LONGS else {"type": "keyword"}
        for name in [*FIELDS.values(), "CloseSort"]
    }
    properties["ExecutionStatus"] = {"type": "integer"}
    properties["Memo"] = {"type": "binary"}
    properties["SearchAttributes"] = {"type": "binary"}
    properties["Custom"] = {"type": "object", "dynamic": True}
    properties["Words"] = {"type": "object", "dynamic": True}
    return {
        "index_patterns": [f"{index}-*"],
        "version": TEMPLATE_VERSION,
        "template": {
            "settings": {
                "number_of_shards": shards,
                "number_of_replicas": replicas,
                "analysis": {
                    # Text `=` is "every word of the query is among the value's words", a word being a
                    # run of letters and digits, lower-cased (visibility.query.memory.text_tokens).
                    "tokenizer": {"perdura_word_split": {"type": "pattern", "pattern": "[^\\p{L}\\p{N}]+"}},
                    "analyzer": {
                        "perdura_words": {
                            "type": "custom",
                            "tokenizer": "perdura_word_split",
                            "filter": ["lowercase"],
                        }
                    },
                },
            },
            "mappings": {
                "dynamic": "strict",
                "_source": {"enabled": True},
                "properties": properties,
                "dynamic_templates": [
                    *(
                        {f"custom_{t.name.lower()}": {"path_match": f"Custom.{t.name}.*", "mapping": mapping}}
                        for t, mapping in CUSTOM_TYPES.items()
                    ),
                    {"words": {"path_match": "Words.*", "mapping": {"type": "keyword"}}},
                ],
            },
        },
    }


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def field_name(name: str) -> str:
    """A custom attribute name as a field segment: dots would split the path, so they and spaces
    (the other characters a name may have) become `~` and two hex digits."""
    return _UNSAFE.sub(lambda m: f"~{ord(m.group()):02x}", name)


def _name_of(field: str) -> str:
    return re.sub(r"~([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), field)


def custom_field(name: str, t: SaType) -> str:
    return f"Custom.{t.name}.{field_name(name)}"


def document(record: Record, types: Mapping[str, SaType]) -> dict[str, Any]:
    """A run's document: system fields, typed custom fields, and what listing returns (memo, map).

    Args:
        record: the run's visibility record.
        types: the types of the attributes in `record.custom` (predefined and the namespace's custom
            ones); a value whose attribute is not there any more is left out of the document.
    """
    doc: dict[str, Any] = {field: getattr(record, column) for column, field in FIELDS.items()}
    doc["NamespaceId"] = str(record.namespace_id)
    doc["CloseSort"] = record.close_time if record.close_time is not None else OPEN_SORT
    doc["Memo"] = base64.b64encode(record.memo).decode() if record.memo else None
    doc["SearchAttributes"] = (
        base64.b64encode(record.search_attributes).decode() if record.search_attributes else None
    )
    custom: dict[str, dict[str, object]] = {}
    words: dict[str, list[str]] = {}
    for name, value in record.custom.items():
        t = types.get(name)
        if t is not None and value is not None:
            custom.setdefault(t.name, {})[field_name(name)] = value
            if t == SaType.Text:
                words[field_name(name)] = sorted(set(text_tokens(str(value))))
    doc["Custom"] = custom
    doc["Words"] = words
    return {k: v for k, v in doc.items() if v is not None}


def record_of(source: Mapping[str, Any]) -> Record:
    """The Record a search hit's `_source` holds."""
    values = {column: source.get(field) for column, field in FIELDS.items()}
    values["namespace_id"] = uuid.UUID(source["NamespaceId"])
    custom: dict[str, object] = {}
    for by_name in (source.get("Custom") or {}).values():
        for field, value in by_name.items():
            custom[_name_of(field)] = value
    return Record(
        **values,  # type: ignore[arg-type]  # the mapped fields are the Record's, typed by the template
        memo=base64.b64decode(source["Memo"]) if source.get("Memo") else b"",
        search_attributes=base64.b64decode(source["SearchAttributes"])
        if source.get("SearchAttributes")
        else b"",
        custom=custom,
    )
