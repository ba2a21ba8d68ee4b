"""Workflows of the visibility e2e tests: they set search attributes and memo, and wait to be told to end."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import SearchAttributeKey

CUSTOMER = SearchAttributeKey.for_keyword("PerduraCustomer")
AMOUNT = SearchAttributeKey.for_int("PerduraAmount")
TAGS = SearchAttributeKey.for_keyword_list("PerduraTags")


@workflow.defn
class TaggedWorkflow:
    def __init__(self) -> None:
        self.done = False

    @workflow.run
    async def run(self, amount: int, wait: bool) -> str:
        workflow.upsert_search_attributes([AMOUNT.value_set(amount), TAGS.value_set(["upserted"])])
        workflow.upsert_memo({"stage": "upserted"})
        if wait:
            await workflow.wait_condition(lambda: self.done, timeout=timedelta(minutes=5))
        return "ok"

    @workflow.signal
    def finish(self) -> None:
        self.done = True


@workflow.defn
class BadUpsertWorkflow:
    @workflow.run
    async def run(self) -> None:
        workflow.upsert_search_attributes([SearchAttributeKey.for_int("PerduraNeverRegistered").value_set(1)])
