"""The console's view of a namespace's re-encryption: a namespace admin's "Rotate data key" or
"Re-encrypt" queues the job (engine/persistence/reencrypt.py `start`) for the shard workers, which move
it (engine/shards/reencryption.py); the page only shows the job's row as it moves. A worker that stops
mid-job leaves it to the shard's next lease holder, so no job is left stalled for a person to resume; a
job whose batches keep failing is parked, shown with its error, and may be retried from the page.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from perdura import clock

from engine.models import Reencryption
from engine.persistence import reencrypt
from tenants import datakeys


@dataclass(frozen=True, slots=True)
class KeyState:
    """What the page shows of a namespace's data key and its re-encryption."""

    version: int
    rotated_at: datetime | None
    job: Reencryption | None
    state: str
    """`none`, `waiting` (for every process to seal with the new version), `running` (queued for or moved
    by the shard workers), `parked` (its batches kept failing), `finished`."""
    starts_at: datetime | None
    """When a waiting job begins moving ciphertexts."""
    needed: bool
    """Ciphertexts may still be sealed under an older version: the current one has no finished job."""

    @property
    def percent(self) -> int:
        job = self.job
        if job is None or not job.runs_total:
            return 100 if job is not None and job.finished_at is not None else 0
        return min(100, job.runs_done * 100 // job.runs_total)

    @property
    def live(self) -> bool:
        """The page polls while the job moves (or waits to)."""
        return self.state in ("waiting", "running")


def key_state(namespace_id: uuid.UUID) -> KeyState:
    """The namespace's current data key version and its latest re-encryption, as the page shows them."""
    key = datakeys.current_key(namespace_id)
    version = key.version if key is not None else 0
    rotated_at = key.created_at if key is not None and key.version > 1 else None
    job = reencrypt.last_job(namespace_id)
    starts_at = None
    if job is None:
        state = "none"
    elif job.finished_at is not None:
        state = "finished"
    elif job.parked_at is not None:
        state = "parked"
    elif job.runs_done == 0 and job.next_wakeup_at is not None and clock.now() < job.next_wakeup_at:
        state, starts_at = "waiting", job.next_wakeup_at
    else:
        state = "running"
    finished_target = job.target_version if job is not None and job.finished_at is not None else 1
    needed = version > 1 and state in ("none", "finished") and finished_target < version
    return KeyState(
        version=version, rotated_at=rotated_at, job=job, state=state, starts_at=starts_at, needed=needed
    )


def queue(namespace_id: uuid.UUID) -> bool:
    """Queue the namespace's re-encryption for the shard workers, or retry its parked one; False when one
    is queued or moving already."""
    current = key_state(namespace_id)
    if current.state in ("waiting", "running"):
        return False
    if current.state == "parked" and current.job is not None:
        return reencrypt.retry(current.job.pk)
    reencrypt.start(namespace_id)
    return True
