"""The namespace settings page's data protection, through Django's test client on real Postgres: a
namespace admin erases a data subject after a confirmation that counts its runs (the CLI's and REST's
service: key destroyed, running run terminated, `subject.erase` audited with the person and `console`);
rotates the data key (`namespace.rotate_key` audited so) and the re-encryption moves every old
ciphertext, its progress read from the page. A member below admin gets 403, another organisation 404,
a form posted without its CSRF token 403, and none of them changes anything."""

from __future__ import annotations

import re
import time

import pytest
from django.core.cache import caches
from django.test import Client
from perdura import clock

from engine.models import Execution, Reencryption
from engine.persistence import reencrypt, store
from engine.services import workflows
from engine.shards import timers
from frontend import reencryption
from tenants import datakeys
from tenants.models import AuditEvent, DataKey, Membership, Namespace, SubjectKey
from tests.integration.test_console_tenants import _post
from tests.integration.test_erasure import _payload_datas, _start
from tests.integration.test_rest_api import create_namespace, invite_and_join, signup

pytestmark = pytest.mark.django_db(transaction=True)  # the re-encryption runs on a thread of its own


@pytest.fixture(autouse=True)
def _fresh_throttles():
    caches["throttle"].clear()
    yield
    caches["throttle"].clear()


class People:
    """An organisation's owner, a member made admin of the namespace, a member who is its operator, and
    the owner of another organisation, each with a console session (CSRF enforced)."""

    def __init__(self) -> None:
        owner, org = signup()
        ns = create_namespace(owner, "orders")
        self.namespace = Namespace.objects.get(pk=ns["id"])
        self.clients: dict[str, Client] = {"owner": owner.client}
        for person, role in (("nsadmin", "admin"), ("operator", "operator")):
            email = f"{person}@{org}.example"
            member = invite_and_join(owner, email)
            membership = Membership.objects.get(organization__slug=org, user__email=email)
            r = owner.put(f"/api/v1/namespaces/{ns['id']}/access/{membership.id}/", {"role": role})
            assert r.status_code == 200, r.content
            self.clients[person] = member.client
        other, _ = signup()
        self.clients["other"] = other.client
        self.email = f"nsadmin@{org}.example"
        caches["throttle"].clear()

    @property
    def settings_url(self) -> str:
        return f"/namespaces/{self.namespace.name}/settings"


@pytest.fixture
def people() -> People:
    return People()


def _csrf_of(client: Client, url: str) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', client.get(url).content.decode()).group(1)


def test_a_namespace_admin_erases_a_subject_after_confirming(people):
    namespace = people.namespace
    closed = _start(namespace, "alice-closed", "alice")
    workflows.workflow_terminate(
        namespace=namespace,
        workflow_id=closed.workflow_id,
        run_id=closed.run_id,
        reason="done",
        details=None,
        identity="test",
    )
    running = _start(namespace, "alice-running", "alice")
    bob = _start(namespace, "bob-secret", "bob")
    erase_url = f"{people.settings_url}/erase"
    admin = people.clients["nsadmin"]
    page = admin.get(people.settings_url).content.decode()
    assert 'id="erasure"' in page
    assert f'action="{erase_url}"' in page

    # Below admin: refused as the console refuses (403), another organisation learns nothing (404).
    operator, other = people.clients["operator"], people.clients["other"]
    assert operator.get(people.settings_url).status_code == 403
    token = _csrf_of(operator, f"/namespaces/{namespace.name}/workflows")
    for client, code in ((operator, 403), (other, 404)):
        token = client.cookies["csrftoken"].value if "csrftoken" in client.cookies else token
        for data in ({"subject": "alice"}, {"subject": "alice", "confirm": "erase"}):
            r = client.post(erase_url, {**data, "csrfmiddlewaretoken": token})
            assert r.status_code == code, (client, data, r.status_code)
    # The admin's own form without its CSRF token: refused before the view.
    assert admin.post(erase_url, {"subject": "alice", "confirm": "erase"}).status_code == 403
    assert SubjectKey.objects.get(namespace=namespace, subject="alice").erased_at is None
    assert not AuditEvent.objects.filter(action="subject.erase").exists()

    # An empty subject is refused on the settings page, with the form.
    empty = _post(admin, erase_url, {"subject": ""}, people.settings_url)
    assert empty.status_code == 400
    assert b"erase-error" in empty.content
    over = _post(admin, erase_url, {"subject": "x" * 2049}, people.settings_url)
    assert over.status_code == 400
    assert b"at most 2048 characters" in over.content
    # A subject as long as allowed, in characters of several bytes: counted, or refused with why.
    wide = _post(admin, erase_url, {"subject": "ü" * 2048}, people.settings_url)
    assert wide.status_code in (200, 400), wide.status_code
    assert b"Runs naming this subject" in wide.content or b"erase-error" in wide.content

    # The confirmation: what happens, how many runs; nothing erased yet.
    confirm = _post(admin, erase_url, {"subject": "alice"}, people.settings_url)
    assert confirm.status_code == 200
    text = confirm.content.decode()
    assert re.search(r'id="erase-runs">2<', text)
    assert re.search(r'id="erase-running">1<', text)
    assert re.search(r'id="erase-archived">0<', text)
    assert "unreadable everywhere" in text
    assert "archives and exports" in text
    assert "running run is terminated" in text
    assert "cannot be undone" in text
    assert 'name="confirm" value="erase"' in text
    assert SubjectKey.objects.get(namespace=namespace, subject="alice").erased_at is None

    # Confirmed: the service's erasure, back on the settings page with what it did.
    done = _post(admin, erase_url, {"subject": "alice", "confirm": "erase"}, people.settings_url)
    assert done.status_code == 302
    assert done["Location"] == f"{people.settings_url}?done=erased&destroyed=1&terminated=1#erasure"
    assert "alice" not in done["Location"]
    notice = admin.get(done["Location"]).content.decode()
    assert "1 key destroyed, 1 running run terminated" in notice
    key = SubjectKey.objects.get(namespace=namespace, subject="alice")
    assert key.erased_at is not None
    assert bytes(key.wrapped_key) == b""
    for execution in (closed, running):
        assert set(_payload_datas(execution)) == {b"binary/x-perdura-erased"}
    assert Execution.objects.get(pk=running.pk).close_time is not None
    assert set(_payload_datas(bob)) == {b"json/plain"}
    entry = AuditEvent.objects.get(namespace_id=namespace.id, action="subject.erase")
    assert (entry.actor_kind, entry.actor_label, entry.via, entry.target, entry.outcome) == (
        "user",
        people.email,
        "console",
        "subject/alice",
        "ok",
    )
    assert entry.details == {
        "destroyed_keys": [str(key.id)],
        "terminated_runs": [f"workflow/{running.workflow_id}/{running.run_id}"],
    }


def _wait_done(client: Client, url: str, namespace: Namespace, seconds: float = 30) -> str:
    """Poll the card while a shard worker's passes (as the production workers make them) move the job."""
    deadline = time.monotonic() + seconds
    while True:
        timers.process_shard(reencrypt.shard_of(namespace.id), "test-worker")
        card = client.get(url, HTTP_HX_REQUEST="true").content.decode()
        if 'id="reencryption-state">Done<' in card:
            return card
        assert time.monotonic() < deadline, card
        time.sleep(0.2)


def test_a_namespace_admin_rotates_the_key_and_the_reencryption_moves_old_data(people, monkeypatch):
    monkeypatch.setenv("PERDURA_DATAKEY_REFRESH_SECONDS", "0")
    namespace = people.namespace
    runs = [_start(namespace, f"secret-{i}", None) for i in range(3)]
    rotate_url = f"{people.settings_url}/data-key/rotate"
    card_url = f"{people.settings_url}/data-key"
    reencrypt_url = f"{people.settings_url}/data-key/reencrypt"
    admin = people.clients["nsadmin"]
    page = admin.get(people.settings_url).content.decode()
    assert re.search(r'id="data-key-version">1<', page)
    assert "Rotate data key" in page
    assert "Re-encrypt old data" not in page  # nothing is under an older version

    # Below admin or elsewhere: nothing rotates, nothing is shown.
    token = _csrf_of(people.clients["operator"], f"/namespaces/{namespace.name}/workflows")
    for person, code in (("operator", 403), ("other", 404)):
        client = people.clients[person]
        token = client.cookies["csrftoken"].value if "csrftoken" in client.cookies else token
        assert client.get(card_url).status_code == code
        for url in (rotate_url, reencrypt_url):
            r = client.post(url, {"confirm": "rotate", "csrfmiddlewaretoken": token})
            assert r.status_code == code, (person, url)
    assert admin.post(rotate_url, {"confirm": "rotate"}).status_code == 403  # no CSRF token
    # Nothing to move yet: refused, with why.
    nothing = _post(admin, reencrypt_url, {}, people.settings_url)
    assert nothing.status_code == 400
    assert b"Nothing to re-encrypt" in nothing.content
    assert DataKey.objects.filter(namespace=namespace).count() == 1
    assert reencrypt.last_job(namespace.id) is None

    r = _post(admin, rotate_url, {"confirm": "rotate"}, people.settings_url)
    assert r.status_code == 302
    assert r["Location"] == f"{people.settings_url}?done=rotated#data-key"
    assert DataKey.objects.filter(namespace=namespace).count() == 2
    entry = AuditEvent.objects.get(namespace_id=namespace.id, action="namespace.rotate_key")
    assert (entry.actor_kind, entry.actor_label, entry.via, entry.details) == (
        "user",
        people.email,
        "console",
        {"data_key_version": 2},
    )
    card = _wait_done(admin, card_url, namespace)
    assert re.search(r'id="data-key-version">2<', card)
    assert re.search(r'id="reencryption-runs">3 of 3<', card)
    assert "hx-trigger" not in card  # done: the card stops polling
    assert reencrypt.stale_count(namespace.id) == 0
    job = reencrypt.last_job(namespace.id)
    assert (job.target_version, job.runs_done, job.runs_total) == (2, 3, 3)
    assert job.rewritten > 0
    for i, execution in enumerate(runs):
        text = "".join(e.SerializeToString().decode("latin-1") for e in store.history_events(execution))
        assert f"secret-{i}" in text
    page = admin.get(people.settings_url).content.decode()
    assert "Re-encrypt old data" not in page
    assert reencryption.key_state(namespace.id).state == "finished"


def test_a_queued_reencryption_is_left_to_the_workers_and_a_parked_one_is_retried(people, monkeypatch):
    """The page only queues the job and shows its row: a job queued or moving blocks a new rotation
    (409) and a second queueing; a job whose batches kept failing is shown with its error and Retry,
    which carries it on from its cursor to done (the same job, every run counted once)."""
    monkeypatch.setenv("PERDURA_DATAKEY_REFRESH_SECONDS", "0")
    namespace = people.namespace
    for i in range(4):
        _start(namespace, f"old-{i}", None)
    admin = people.clients["nsadmin"]
    # `perdura namespace rotate-key --no-reencrypt`: the page offers to move the old data.
    datakeys.datakey_rotate(namespace=namespace)
    page = admin.get(people.settings_url).content.decode()
    assert "Re-encrypt old data" in page
    r = _post(admin, f"{people.settings_url}/data-key/reencrypt", {}, people.settings_url)
    assert r["Location"].endswith("?done=reencrypting#data-key")
    job = reencrypt.last_job(namespace.id)
    assert job.runs_done == 0  # queued, not run by the web process
    Reencryption.objects.filter(pk=job.pk).update(next_wakeup_at=clock.now())
    reencrypt.step(job, batch=2)  # a worker moved one batch of two runs
    page = admin.get(people.settings_url).content.decode()
    assert 'id="reencryption-state">Running<' in page, reencryption.key_state(namespace.id)
    assert re.search(r'id="reencryption-runs">2 of 4<', page)
    assert "hx-trigger" in page  # the card follows it

    busy = _post(admin, f"{people.settings_url}/data-key/rotate", {"confirm": "rotate"}, people.settings_url)
    assert busy.status_code == 409
    assert b"A re-encryption is under way" in busy.content
    r = _post(admin, f"{people.settings_url}/data-key/reencrypt", {}, people.settings_url)
    assert r["Location"].endswith("?done=reencryption-running#data-key")
    assert Reencryption.objects.get(pk=job.pk).runs_done == 2

    # Its batches kept failing: parked, shown with the error, and Retry.
    Reencryption.objects.filter(pk=job.pk).update(
        parked_at=clock.now(), failures=3, last_error="RuntimeError: the store failed"
    )
    page = admin.get(people.settings_url).content.decode()
    assert 'id="reencryption-state">Failed<' in page
    assert "RuntimeError: the store failed" in page
    assert "Retry re-encryption" in page
    assert "hx-trigger" not in page  # nothing moves: no polling
    r = _post(admin, f"{people.settings_url}/data-key/reencrypt", {}, people.settings_url)
    assert r["Location"].endswith("?done=reencrypting#data-key")
    card = _wait_done(admin, f"{people.settings_url}/data-key", namespace)
    assert re.search(r'id="reencryption-runs">4 of 4<', card)
    assert list(Reencryption.objects.filter(namespace_id=namespace.id).values_list("pk", flat=True)) == [
        job.pk
    ]
    assert reencrypt.stale_count(namespace.id) == 0
    assert "Re-encrypt old data" not in admin.get(people.settings_url).content.decode()
