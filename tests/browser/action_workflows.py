"""A workflow for the console's action tests: signals, a query and an update add to a tally."""

from __future__ import annotations

from temporalio import workflow


@workflow.defn
class ConsoleTally:
    """Collects items from `add` signals and `add_now` updates until it has `goal` of them."""

    def __init__(self) -> None:
        self.items: list[str] = []

    @workflow.run
    async def run(self, goal: int) -> list[str]:
        await workflow.wait_condition(lambda: len(self.items) >= goal)
        return self.items

    @workflow.signal
    def add(self, item: str) -> None:
        self.items.append(item)

    @workflow.query
    def tally(self) -> list[str]:
        return self.items

    @workflow.update
    def add_now(self, item: str) -> int:
        self.items.append(item)
        return len(self.items)

    @add_now.validator
    def check_item(self, item: str) -> None:
        if not item:
            raise ValueError("an item needs a name")
