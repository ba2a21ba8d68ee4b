"""The OpenSearch visibility backend: the index behind its alias, bulk writes, and list, count, scan.

Documents and the template are in visibility.backends.opensearch.documents, filters in
visibility.backends.opensearch.compiler. opensearch-py is imported on first use, so a deployment on
SQL never loads it.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from visibility.backends.base import (
    BackendUnavailable,
    Record,
    VisibilityBackend,
    check_intervals,
    decode_page_token,
    encode_page_token,
)
from visibility.backends.opensearch.compiler import compile_filter, sort_of
from visibility.backends.opensearch.documents import OPEN_SORT, record_of, template_body
from visibility.query import ast

PIT_KEEP_ALIVE = "1m"
MAX_WINDOW = 10_000
"""from + size limit of an OpenSearch search (index.max_result_window): ORDER BY pages end there."""


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("invalid page token")
    return value


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
            return self.client.search(index=self.index, body=body, **params)
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

    def count_by_interval(
        self, namespace_id: uuid.UUID, query: ast.Query, *, field: str, start: int, step: int, buckets: int
    ) -> list[int]:
        """A range aggregation with one range per interval (`from` inclusive, `to` exclusive)."""
        check_intervals(field, step, buckets)
        ranges = [{"from": start + i * step, "to": start + (i + 1) * step} for i in range(buckets)]
        with _reads():
            response = self._search(
                {
                    "query": compile_filter(namespace_id, query),
                    "size": 0,
                    "aggs": {"intervals": {"range": {"field": field, "ranges": ranges, "keyed": False}}},
                }
            )
        found = (response.get("aggregations") or {}).get("intervals", {}).get("buckets", [])
        counts = [0] * buckets
        for bucket in found:
            index = (int(bucket["from"]) - start) // step
            if 0 <= index < buckets:
                counts[index] = int(bucket["doc_count"])
        return counts

    def _list_page(
        self, namespace_id: uuid.UUID, query: ast.Query, page_size: int, page_token: bytes
    ) -> tuple[list[Record], bytes]:
        state = decode_page_token(page_token) if page_token else {}
        body: dict[str, Any] = {
            "query": compile_filter(namespace_id, query),
            "sort": sort_of(query),
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
            token = encode_page_token({"offset": offset + page_size}) if len(hits) > page_size else b""
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
            token = encode_page_token({"c": close, "s": last.start_time, "e": last.execution_id})
        return records, token

    def _scan_page(
        self, namespace_id: uuid.UUID, query: ast.Query, page_size: int, page_token: bytes
    ) -> tuple[list[Record], bytes]:
        state = decode_page_token(page_token) if page_token else {}
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
            return records, encode_page_token({"pit": pit, "after": records[-1].execution_id})
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
