"""A workflow whose client encodes every payload with a codec: input, signal and update arguments,
result, and a failure's details."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError


@workflow.defn
class CodecOrder:
    """Waits for an `approve` signal; notes arrive by the `note` update; rejects with details."""

    def __init__(self) -> None:
        self.approvals: list[dict] = []
        self.notes: list[str] = []

    @workflow.run
    async def run(self, order: dict) -> dict:
        await workflow.wait_condition(lambda: bool(self.approvals))
        approval = self.approvals[0]
        if approval.get("reject"):
            raise ApplicationError(
                "order rejected", {"why": approval["reject"]}, type="Rejected", non_retryable=True
            )
        return {"total": order["total"], "approved_by": approval["by"], "notes": self.notes}

    @workflow.signal
    def approve(self, approval: dict) -> None:
        self.approvals.append(approval)

    @workflow.update
    def note(self, text: str) -> str:
        self.notes.append(text)
        return f"noted {len(self.notes)}"
