"""Online key rotation on real Postgres: a namespace's data key (new writes sealed under the new version,
old ciphertexts moved by the resumable re-encryption) and the master key (data keys re-wrapped while
both keys open them). Every ciphertext stays readable at every step, and none opens anywhere else."""

from __future__ import annotations

import base64
import os
import uuid

import pytest
from cryptography.exceptions import InvalidTag
from django.conf import settings
from perdura import clock, masterkey
from temporalio.api.common.v1 import Memo, Payload, Payloads, WorkflowType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from engine.models import Execution, HistoryBatch, Reencryption
from engine.persistence import encryption, leases, reencrypt, store
from engine.services import workflows
from engine.shards import parking, reencryption, timers
from tenants import datakeys
from tenants.models import DataKey, Namespace
from tenants.services.namespaces import namespace_register

pytestmark = pytest.mark.django_db(transaction=True)


def _payloads(text: str) -> Payloads:
    return Payloads(payloads=[Payload(metadata={"encoding": b"json/plain"}, data=f'"{text}"'.encode())])


def start(namespace: Namespace, secret: str) -> Execution:
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=f"wf-{uuid.uuid4()}",
        workflow_type=WorkflowType(name="T"),
        task_queue=TaskQueue(name="tq"),
        input=_payloads(secret),
        memo=Memo(fields={"note": Payload(metadata={"encoding": b"json/plain"}, data=b'"memo"')}),
    )
    result = workflows.workflow_start(namespace=namespace, request=request)
    execution = Execution.objects.get(namespace=namespace, run_id=result.run_id)
    workflows.workflow_signal(
        namespace=namespace,
        workflow_id=execution.workflow_id,
        run_id=execution.run_id,
        signal_name="s",
        input=_payloads(secret + "-signal"),
        identity="test",
        request_id=str(uuid.uuid4()),
        header=None,
    )
    return Execution.objects.get(pk=execution.pk)


def history(execution: Execution) -> list[bytes]:
    return [
        e.SerializeToString(deterministic=True)
        for e in store.history_events(Execution.objects.get(pk=execution.pk))
    ]


def versions(execution: Execution) -> set[int | None]:
    execution = Execution.objects.get(pk=execution.pk)
    found = {reencrypt.sealed_version(execution.state)}
    found |= {
        reencrypt.sealed_version(d)
        for d in HistoryBatch.objects.filter(execution=execution).values_list("data", flat=True)
    }
    return found


@pytest.fixture
def namespace() -> Namespace:
    return namespace_register(name=f"keys-{uuid.uuid4().hex[:8]}")


def test_a_new_version_seals_new_writes_and_reencryption_moves_the_old_ones(namespace):
    old = [start(namespace, f"old-{i}") for i in range(3)]
    before = {e.pk: history(e) for e in old}
    datakeys.datakey_create(namespace=namespace)
    new = start(namespace, "new")
    assert versions(new) == {2}
    assert all(versions(e) == {1} for e in old)
    # Old data reads before, during and after the move.
    assert all(history(e) == before[e.pk] for e in old)
    assert reencrypt.stale_count(namespace.id) > 0

    job = reencrypt.start(namespace.id)
    assert job.target_version == 2
    assert job.runs_total == 4
    # Queued, not run: due once every process seals with version 2 (the refresh time and a margin).
    assert job.shard == reencrypt.shard_of(namespace.id)
    assert job.next_wakeup_at >= datakeys.current_key(namespace.id).created_at + reencrypt.start_delay()
    assert timers.process_shard(job.shard, "test") == 0
    assert Reencryption.objects.get(pk=job.pk).runs_done == 0
    Reencryption.objects.filter(pk=job.pk).update(next_wakeup_at=clock.now())
    reencrypt.step(job, batch=1)  # then "crash": the job resumes from its cursor
    assert Reencryption.objects.get(pk=job.pk).runs_done == 1
    resumed = reencrypt.start(namespace.id)
    assert resumed.pk == job.pk
    assert timers.process_shard(job.shard, "test")  # the shard's pass moves the rest
    result = Reencryption.objects.get(pk=job.pk)
    assert result.finished_at is not None
    assert result.next_wakeup_at is None
    assert (result.runs_done, result.runs_total) == (4, 4)
    assert result.rewritten >= 3 * 3  # each old run: its state, its history batches, its memo
    assert reencrypt.stale_count(namespace.id) == 0
    assert all(versions(e) == {2} for e in old)
    assert all(history(e) == before[e.pk] for e in old)
    # Run again, it finds nothing to move.
    again = reencrypt.start(namespace.id)
    assert again.pk != job.pk
    Reencryption.objects.filter(pk=again.pk).update(next_wakeup_at=clock.now())
    timers.process_shard(again.shard, "test")
    again.refresh_from_db()
    assert again.finished_at is not None
    assert again.rewritten == 0


def test_a_job_is_moved_only_by_the_shard_lease_holder_and_never_counted_twice(namespace):
    for i in range(3):
        start(namespace, f"old-{i}")
    datakeys.datakey_create(namespace=namespace)
    job = reencrypt.start(namespace.id)
    Reencryption.objects.filter(pk=job.pk).update(next_wakeup_at=clock.now())
    ours = leases.acquire(job.shard, "worker-a")
    assert ours is not None
    # Another worker finds the shard leased: it moves nothing.
    assert timers.process_shard(job.shard, "worker-b") is None
    # A worker whose lease has moved on writes nothing (its batch rolls back with the fence check).
    with pytest.raises(leases.LeaseLost):
        reencryption.step(job.pk, job.shard, ours - 1)
    assert Reencryption.objects.get(pk=job.pk).runs_done == 0
    assert reencryption.step(job.pk, job.shard, ours)
    leases.release(job.shard, ours)
    assert timers.process_shard(job.shard, "worker-b")
    job.refresh_from_db()
    assert (job.runs_done, job.runs_total, job.finished_at is not None) == (3, 3, True)


def test_a_job_whose_batches_keep_failing_is_parked_and_can_be_retried(namespace, monkeypatch):
    start(namespace, "old")
    datakeys.datakey_create(namespace=namespace)
    job = reencrypt.start(namespace.id)
    Reencryption.objects.filter(pk=job.pk).update(next_wakeup_at=clock.now())

    def broken(*args, **kwargs):
        raise RuntimeError("cannot open the ciphertext")

    monkeypatch.setattr(reencrypt, "_runs_rows", broken)
    for _ in range(settings.PERDURA_SHARD_MAX_ATTEMPTS):
        Reencryption.objects.filter(pk=job.pk, parked_at__isnull=True).update(next_wakeup_at=clock.now())
        timers.process_shard(job.shard, "test")
    job.refresh_from_db()
    assert job.parked_at is not None
    assert "cannot open the ciphertext" in job.last_error
    assert [r.id for r in parking.parked_list(namespace=namespace.name)] == [f"reencryption:{job.pk}"]
    monkeypatch.undo()
    assert reencrypt.retry(job.pk)
    timers.process_shard(job.shard, "test")
    job.refresh_from_db()
    assert (job.finished_at is not None, job.runs_done, job.failures) == (True, 1, 0)
    assert reencrypt.stale_count(namespace.id) == 0


def test_a_run_written_during_reencryption_keeps_the_writers_state(namespace):
    execution = start(namespace, "busy")
    datakeys.datakey_create(namespace=namespace)
    stale = Execution.objects.get(pk=execution.pk)
    # A writer commits between the job's read and its write: its state (sealed under the new key) stays.
    workflows.workflow_signal(
        namespace=namespace,
        workflow_id=execution.workflow_id,
        run_id=execution.run_id,
        signal_name="later",
        input=None,
        identity="test",
        request_id=str(uuid.uuid4()),
        header=None,
    )
    written = bytes(Execution.objects.get(pk=execution.pk).state)
    reencrypt._runs_rows(namespace.id, [stale], target=2)
    assert bytes(Execution.objects.get(pk=execution.pk).state) == written
    assert [e.event_type for e in store.history_events(Execution.objects.get(pk=execution.pk))][-1] != 0


def test_a_ciphertext_copied_to_another_run_position_or_namespace_does_not_open(namespace):
    a, b = start(namespace, "a"), start(namespace, "b")
    other = start(namespace_register(name=f"keys-{uuid.uuid4().hex[:8]}"), "c")
    blob = bytes(HistoryBatch.objects.filter(execution=a).order_by("first_event_id").first().data)
    encryption.unseal(namespace.id, blob, encryption.history_aad(namespace.id, a.run_id, 1))  # the control
    with pytest.raises(InvalidTag):
        encryption.unseal(namespace.id, blob, encryption.history_aad(namespace.id, b.run_id, 1))
    with pytest.raises(InvalidTag):
        encryption.unseal(namespace.id, blob, encryption.history_aad(namespace.id, a.run_id, 3))
    with pytest.raises(InvalidTag):
        encryption.unseal(other.namespace_id, blob, encryption.history_aad(other.namespace_id, a.run_id, 1))


@pytest.fixture
def master_keys(monkeypatch):
    """Set the master keys of this process as `set_keys(current, previous)` says, forgetting every
    unwrapped data key, as a restarted server would."""

    def set_keys(current: str, previous: str | None = None) -> None:
        monkeypatch.setenv("PERDURA_MASTER_KEY", current)
        if previous is None:
            monkeypatch.delenv("PERDURA_MASTER_KEY_PREVIOUS", raising=False)
        else:
            monkeypatch.setenv("PERDURA_MASTER_KEY_PREVIOUS", previous)
        masterkey.master_key.cache_clear()
        masterkey.previous_master_key.cache_clear()
        datakeys._cache.clear()
        datakeys._current.clear()

    yield set_keys
    monkeypatch.undo()
    masterkey.master_key.cache_clear()
    masterkey.previous_master_key.cache_clear()
    datakeys._cache.clear()
    datakeys._current.clear()


def test_master_key_rotation_rewraps_every_data_key_and_old_data_reads_throughout(master_keys):
    k1, k2 = (base64.b64encode(os.urandom(32)).decode() for _ in range(2))
    master_keys(k1)
    namespace = namespace_register(name=f"keys-{uuid.uuid4().hex[:8]}")
    datakeys.datakey_create(namespace=namespace)
    execution = start(namespace, "under-k1")
    before = history(execution)

    # The new key alone cannot open data keys wrapped by the old one, and says what to do.
    master_keys(k2)
    with pytest.raises(datakeys.MasterKeyMissing, match="PERDURA_MASTER_KEY_PREVIOUS"):
        history(execution)
    # Both keys: everything opens, re-wrapped or not.
    master_keys(k2, previous=k1)
    assert history(execution) == before
    assert datakeys.wrapped_by_other_keys() > 0
    result = datakeys.rewrap_all(batch=1)
    assert result.rewrapped >= 2  # at least this namespace's two versions (other tests' rows too)
    assert datakeys.wrapped_by_other_keys() == 0
    assert set(DataKey.objects.filter(namespace=namespace).values_list("master_key_id", flat=True)) == {
        masterkey.key_id(base64.b64decode(k2))
    }
    assert datakeys.rewrap_all().rewrapped == 0  # idempotent
    # The new key alone now opens everything; the old one alone opens nothing.
    master_keys(k2)
    assert history(execution) == before
    master_keys(k1)
    with pytest.raises(datakeys.MasterKeyMissing):
        history(execution)
