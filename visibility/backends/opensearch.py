"""The OpenSearch visibility backend: the index template, documents, and filters compiled to query DSL.

One index (behind an alias) holds every namespace's runs; each document carries its namespace and every
query filters on it first, so no filter can see another namespace. Custom attributes are namespaced by
type rather than by namespace: `Custom.<Type>.<name>` (a dynamic template maps each type), so two
namespaces may give one name different types without a mapping conflict, and adding an attribute
needs no mapping change. Times are microseconds since the epoch in `long` fields, as in the SQL
record, so both backends compare and order the same values exactly.

Documents are written by the shard workers from transfer rows (engine/shards/visibility_index.py),
with the run's `db_version` as external version: OpenSearch keeps the highest, so a late, older
update never overwrites a newer one. Filters are compiled in negation normal form like the SQL ones:
each leaf is true only for a run that has the attribute and matches, which gives the in-memory
evaluator's three-valued answers for whole filters.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from visibility.backends.base import BackendUnavailable, VisibilityBackend
from visibility.backends.sql import Record, negation_normal_form
from visibility.query import ast
from visibility.query.memory import text_tokens
from visibility.search_attributes import SaType

TEMPLATE_VERSION = 1
PIT_KEEP_ALIVE = "1m"
OPEN_SORT = 2**53 - 1
"""CloseSort of a run that has not closed (past every close time; exact even where JSON numbers are doubles)."""
MAX_WINDOW = 10_000
"""from + size limit of an OpenSearch search (index.max_result_window): ORDER BY pages end there."""

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
_CUSTOM_TYPES = {
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
                        for t, mapping in _CUSTOM_TYPES.items()
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
        **values,  # type: ignore[arg-type]
        memo=base64.b64decode(source["Memo"]) if source.get("Memo") else b"",
        search_attributes=base64.b64decode(source["SearchAttributes"])
        if source.get("SearchAttributes")
        else b"",
        custom=custom,
    )


# --- compiling filters ------------------------------------------------------------------------------


def _field(attr: ast.Attr) -> str:
    if attr.column is not None:
        return FIELDS[attr.column]
    assert attr.type is not None
    return custom_field(attr.name, attr.type)


_MATCH_NONE: dict[str, Any] = {"match_none": {}}
_RANGE = {">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}


def _exists(field: str) -> dict[str, Any]:
    return {"exists": {"field": field}}


def _present_and_not(field: str, query: dict[str, Any]) -> dict[str, Any]:
    """Has the attribute and `query` is false: a negated leaf of the negation normal form."""
    return {"bool": {"filter": [_exists(field)], "must_not": [query]}}


def _text(attr: ast.Attr, words: str) -> dict[str, Any]:
    """Text `=`: every word of `words` is among the value's (the words the document carries, split
    by the same function as the in-memory evaluator's, so no analyzer can disagree with it)."""
    tokens = text_tokens(words)
    if not tokens:
        return _MATCH_NONE
    field = f"Words.{field_name(attr.name)}"
    return {"bool": {"filter": [{"term": {field: t}} for t in dict.fromkeys(tokens)]}}


def _bound(field: str, op: str, value: object) -> dict[str, Any]:
    """One side of a range. The empty string is the least keyword, and a range with it as a bound is
    not reliably honoured (osmem treats it as no bound), so those comparisons are spelled out."""
    if value == "":
        if op == "<":
            return _MATCH_NONE
        if op == "<=":
            return {"term": {field: ""}}
        if op == ">=":
            return _exists(field)
        return _present_and_not(field, {"term": {field: ""}})
    return {"range": {field: {_RANGE[op]: value}}}


def _leaf(node: ast.Leaf) -> dict[str, Any]:
    attr = node.attr
    field = _field(attr)
    if isinstance(node, ast.IsNull):
        return _exists(field) if node.negated else {"bool": {"must_not": [_exists(field)]}}
    if isinstance(node, ast.Compare):
        if attr.type == SaType.Text:
            hit = _text(attr, str(node.value))
            return hit if node.op == "=" else _present_and_not(field, hit)
        if node.op == "=":
            return {"term": {field: node.value}}
        if node.op == "!=":
            return _present_and_not(field, {"term": {field: node.value}})
        return _bound(field, node.op, node.value)
    if isinstance(node, ast.In):
        if not node.values:
            return _MATCH_NONE
        hit = {"terms": {field: list(node.values)}}
        return _present_and_not(field, hit) if node.negated else hit
    if isinstance(node, ast.Between):
        hit = {"bool": {"filter": [_bound(field, ">=", node.low), _bound(field, "<=", node.high)]}}
        return _present_and_not(field, hit) if node.negated else hit
    assert isinstance(node, ast.StartsWith)
    hit = {"prefix": {field: node.prefix}} if node.prefix else _exists(field)
    return _present_and_not(field, hit) if node.negated else hit


def _node(node: ast.Node) -> dict[str, Any]:
    if isinstance(node, ast.And):
        return {"bool": {"filter": [_node(n) for n in node.items]}}
    if isinstance(node, ast.Or):
        return {"bool": {"should": [_node(n) for n in node.items], "minimum_should_match": 1}}
    assert not isinstance(node, ast.Not), "compile the negation normal form"
    return _leaf(node)


def compile_filter(namespace_id: uuid.UUID, query: ast.Query) -> dict[str, Any]:
    """The query DSL selecting the namespace's runs that match a resolved filter (filter context only:
    no scoring)."""
    clauses: list[dict[str, Any]] = [{"term": {"NamespaceId": str(namespace_id)}}]
    if query.where is not None:
        clauses.append(_node(negation_normal_form(query.where)))
    return {"bool": {"filter": clauses}}


DEFAULT_SORT = [{"CloseSort": "desc"}, {"StartTime": "desc"}, {"ExecutionId": "desc"}]


def _sort(query: ast.Query) -> list[dict[str, Any]]:
    if not query.order_by:
        return DEFAULT_SORT
    terms: list[dict[str, Any]] = []
    for term in query.order_by:
        assert term.attr.type is not None
        unmapped = _CUSTOM_TYPES[term.attr.type]["type"]
        if term.attr.column == "status":
            unmapped = "integer"
        terms.append(
            {
                _field(term.attr): {
                    "order": "desc" if term.descending else "asc",
                    "missing": "_last",
                    "unmapped_type": unmapped,
                }
            }
        )
    return [*terms, {"ExecutionId": "desc"}]


# --- page tokens ------------------------------------------------------------------------------------


def _encode_token(data: dict[str, object]) -> bytes:
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode())


def _decode_token(token: bytes) -> dict[str, Any]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token))
    except ValueError:
        raise ValueError("invalid page token") from None
    if not isinstance(data, dict):
        raise ValueError("invalid page token")
    return data


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("invalid page token")
    return value


# --- the backend ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ack:
    """What OpenSearch said about one document of a bulk request."""

    done: bool
    """Applied, or refused because the index already holds this version or a newer one (409)."""
    retry: bool
    """Not applied for a passing reason (overload, unavailable shard): send it again later."""
    error: str = ""


def client_from_url(url: str, **options: Any) -> Any:
    """An opensearch-py client for a URL (`https://user:password@host:9200`; userinfo becomes Basic auth)."""
    from opensearchpy import OpenSearch

    return OpenSearch(
        hosts=[url],
        verify_certs=url.startswith("https"),
        ca_certs=getattr(settings, "PERDURA_OPENSEARCH_CA_CERTS", None) or None,
        timeout=options.pop("timeout", 30),
        max_retries=options.pop("max_retries", 0),  # the indexer retries whole batches with backoff
        retry_on_timeout=False,
        **options,
    )


@contextlib.contextmanager
def _reads() -> Iterator[None]:
    """Connection failures, timeouts, 429 and 5xx of a read become BackendUnavailable."""
    from opensearchpy.exceptions import ConnectionError as Unreachable
    from opensearchpy.exceptions import TransportError

    try:
        yield
    except Unreachable as e:
        raise BackendUnavailable(f"the visibility store (OpenSearch) is unreachable: {e}") from None
    except TransportError as e:
        status = e.status_code if isinstance(e.status_code, int) else 500
        if status == 429 or status >= 500:
            raise BackendUnavailable(f"the visibility store (OpenSearch) failed: {e}") from None
        raise


class OpenSearchBackend(VisibilityBackend):
    """Reads and writes of the visibility index (an alias over `<index>-v<N>` indices)."""

    name = "opensearch"

    def __init__(self, client: Any, index: str, *, shards: int = 1, replicas: int = 1) -> None:
        self.client = client
        self.index = index
        self.shards = shards
        self.replicas = replicas
        self._ready = False

    @classmethod
    def from_settings(cls) -> OpenSearchBackend:
        url = getattr(settings, "PERDURA_OPENSEARCH_URL", "")
        if not url:
            raise ImproperlyConfigured("PERDURA_VISIBILITY=opensearch needs PERDURA_OPENSEARCH_URL")
        return cls(
            client_from_url(url),
            getattr(settings, "PERDURA_OPENSEARCH_INDEX", "") or "perdura-visibility",
            shards=int(getattr(settings, "PERDURA_OPENSEARCH_SHARDS", 1)),
            replicas=int(getattr(settings, "PERDURA_OPENSEARCH_REPLICAS", 1)),
        )

    # -- the index --

    def ensure_index(self) -> None:
        """Install the template and create the first index behind the alias, unless already there."""
        if self._ready:
            return
        from opensearchpy.exceptions import RequestError

        self.client.indices.put_index_template(
            name=self.index, body=template_body(self.index, shards=self.shards, replicas=self.replicas)
        )
        if not self.client.indices.exists_alias(name=self.index):
            try:
                self.client.indices.create(
                    index=f"{self.index}-v1", body={"aliases": {self.index: {"is_write_index": True}}}
                )
            except RequestError as e:
                if "already_exists" not in str(e):
                    raise
        self._ready = True

    def create_index(self, suffix: str) -> str:
        """A new, empty index `<index>-<suffix>` from the template (for a rebuild); its name."""
        self.client.indices.put_index_template(
            name=self.index, body=template_body(self.index, shards=self.shards, replicas=self.replicas)
        )
        name = f"{self.index}-{suffix}"
        self.client.indices.create(index=name, body={"settings": {"refresh_interval": "-1"}})
        return name

    def switch_alias(self, new_index: str) -> list[str]:
        """Point the alias at `new_index` in one atomic step; the indices it pointed at before."""
        old: list[str] = []
        if self.client.indices.exists_alias(name=self.index):
            old = list(self.client.indices.get_alias(name=self.index))
        self.client.indices.put_settings(index=new_index, body={"index": {"refresh_interval": None}})
        actions: list[dict[str, Any]] = [{"remove": {"index": i, "alias": self.index}} for i in old]
        actions.append({"add": {"index": new_index, "alias": self.index, "is_write_index": True}})
        self.client.indices.update_aliases(body={"actions": actions})
        self._ready = True
        return old

    # -- writes --

    def bulk_index(
        self,
        items: Iterable[tuple[str, int, dict[str, Any]]],
        *,
        index: str | None = None,
        refresh: str | bool = "wait_for",
    ) -> list[Ack]:
        """Index documents with external versions in one bulk request; one Ack per item, in order.

        Args:
            items: (document id, version, document).
            index: where to write (default: the alias).
            refresh: `wait_for` (the default) answers once the documents are searchable, so a caller
                that drops its transfer rows on the answer leaves a run listable from then on.

        Raises:
            opensearchpy.exceptions.TransportError, ConnectionError: the request as a whole failed.
        """
        body: list[dict[str, Any]] = []
        for doc_id, version, doc in items:
            body.append(
                {
                    "index": {
                        "_index": index or self.index,
                        "_id": doc_id,
                        "version": version,
                        "version_type": "external",
                    }
                }
            )
            body.append(doc)
        if not body:
            return []
        response = self.client.bulk(body=body, refresh=refresh)
        acks = []
        for item in response["items"]:
            result = next(iter(item.values()))
            status = int(result.get("status", 500))
            if status < 300 or status == 409:
                acks.append(Ack(done=True, retry=False))
            else:
                error = json.dumps(result.get("error", ""))[:500]
                acks.append(Ack(done=False, retry=status == 429 or status >= 500, error=error))
        return acks

    def delete(self, doc_id: str, version: int) -> None:
        """Remove a run's document, leaving a tombstone at `version` so no older write brings it back."""
        from opensearchpy.exceptions import ConflictError, NotFoundError

        try:
            self.client.delete(
                index=self.index, id=doc_id, version=version, version_type="external", refresh="wait_for"
            )
        except (NotFoundError, ConflictError):
            pass

    def refresh(self, index: str | None = None) -> None:
        self.client.indices.refresh(index=index or self.index)

    # -- reads --

    def _search(self, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        from opensearchpy.exceptions import NotFoundError

        try:
            return self.client.search(index=self.index, body=body, **params)  # type: ignore[no-any-return]
        except NotFoundError:
            return {"hits": {"hits": [], "total": {"value": 0}}, "aggregations": {}}

    def list_page(
        self, namespace_id: uuid.UUID, query: ast.Query, *, page_size: int, page_token: bytes
    ) -> tuple[list[Record], bytes]:
        with _reads():
            return self._list_page(namespace_id, query, page_size, page_token)

    def scan_page(
        self, namespace_id: uuid.UUID, query: ast.Query, *, page_size: int, page_token: bytes
    ) -> tuple[list[Record], bytes]:
        """Pages over a point in time (a snapshot taken by the first page) ordered by row id: runs that
        start or change during the scan neither repeat nor move between pages."""
        with _reads():
            return self._scan_page(namespace_id, query, page_size, page_token)

    def count(self, namespace_id: uuid.UUID, query: ast.Query) -> tuple[int, list[tuple[int, int]]]:
        with _reads():
            return self._count(namespace_id, query)

    def _list_page(
        self, namespace_id: uuid.UUID, query: ast.Query, page_size: int, page_token: bytes
    ) -> tuple[list[Record], bytes]:
        state = _decode_token(page_token) if page_token else {}
        body: dict[str, Any] = {
            "query": compile_filter(namespace_id, query),
            "sort": _sort(query),
            "size": page_size + 1,
            "track_total_hits": False,
        }
        if query.order_by:
            offset = _int(state.get("offset", 0))
            if offset + page_size + 1 > MAX_WINDOW:
                raise ValueError(f"ORDER BY listings end after {MAX_WINDOW} runs on OpenSearch")
            body["from"] = offset
            hits = self._search(body)["hits"]["hits"]
            records = [record_of(h["_source"]) for h in hits[:page_size]]
            token = _encode_token({"offset": offset + page_size}) if len(hits) > page_size else b""
            return records, token
        if state:
            try:
                body["search_after"] = [_int(state["c"]), _int(state["s"]), _int(state["e"])]
            except KeyError:
                raise ValueError("invalid page token") from None
        hits = self._search(body)["hits"]["hits"]
        records = [record_of(h["_source"]) for h in hits[:page_size]]
        token = b""
        if len(hits) > page_size:
            last = records[-1]
            close = last.close_time if last.close_time is not None else OPEN_SORT
            token = _encode_token({"c": close, "s": last.start_time, "e": last.execution_id})
        return records, token

    def _scan_page(
        self, namespace_id: uuid.UUID, query: ast.Query, page_size: int, page_token: bytes
    ) -> tuple[list[Record], bytes]:
        state = _decode_token(page_token) if page_token else {}
        pit = state.get("pit")
        if pit is None:
            try:
                pit = self.client.create_pit(index=self.index, params={"keep_alive": PIT_KEEP_ALIVE})[
                    "pit_id"
                ]
            except Exception as e:
                from opensearchpy.exceptions import NotFoundError

                if isinstance(e, NotFoundError):
                    return [], b""
                raise
        elif not isinstance(pit, str):
            raise ValueError("invalid page token")
        body: dict[str, Any] = {
            "query": compile_filter(namespace_id, query),
            "sort": [{"ExecutionId": "asc"}],
            "size": page_size + 1,
            "track_total_hits": False,
            "pit": {"id": pit, "keep_alive": PIT_KEEP_ALIVE},
        }
        if "after" in state:
            body["search_after"] = [_int(state["after"])]
        from opensearchpy.exceptions import NotFoundError

        try:
            response = self.client.search(body=body)
        except NotFoundError:
            raise ValueError("the scan's point in time expired; start the scan again") from None
        hits = response["hits"]["hits"]
        pit = response.get("pit_id") or pit
        records = [record_of(h["_source"]) for h in hits[:page_size]]
        if len(hits) > page_size:
            return records, _encode_token({"pit": pit, "after": records[-1].execution_id})
        try:
            self.client.delete_pit(body={"pit_id": [pit]})
        except Exception:  # noqa: BLE001 - it expires on its own
            pass
        return records, b""

    def _count(self, namespace_id: uuid.UUID, query: ast.Query) -> tuple[int, list[tuple[int, int]]]:
        where = compile_filter(namespace_id, query)
        if not query.group_by:
            from opensearchpy.exceptions import NotFoundError

            try:
                return int(self.client.count(index=self.index, body={"query": where})["count"]), []
            except NotFoundError:
                return 0, []
        response = self._search(
            {
                "query": where,
                "size": 0,
                "track_total_hits": True,
                "aggs": {"groups": {"terms": {"field": "ExecutionStatus", "size": 64}}},
            }
        )
        buckets = (response.get("aggregations") or {}).get("groups", {}).get("buckets", [])
        groups = sorted(((int(b["key"]), int(b["doc_count"])) for b in buckets), key=lambda g: (-g[1], g[0]))
        return sum(n for _, n in groups), groups
