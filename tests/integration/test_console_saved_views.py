"""Saved views and list columns belong to one person in one namespace: another member of the same
namespace neither sees nor deletes them, and names and queries are escaped on the page."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from frontend.models import ListColumns, SavedView
from tests.integration.test_console_authorization import world  # noqa: F401 (a fixture)
from tests.integration.test_run_export_rest import signing_key  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db

NAME = '<script>window.__x=1</script> "late" runs'


def test_views_and_columns_are_per_person(world):  # noqa: F811
    owner, reader = Client(), Client()
    owner.force_login(world.users["owner"])
    reader.force_login(world.users["reader"])
    base = f"/namespaces/{world.namespace.name}"
    saved = owner.post(
        base + "/saved-views",
        {
            "name": NAME,
            "query": 'WorkflowType = "<b>x</b>"',
            "range": "24h",
            "column": ["run_id", "duration"],
        },
    )
    assert saved.status_code == 302
    view = SavedView.objects.get(namespace=world.namespace, name=NAME)
    assert saved["Location"] == f"{base}/workflows?view={view.id}"
    assert view.person == f"user:{world.users['owner'].pk}"
    assert view.time_range == {"range": "24h", "time_field": "StartTime"}
    assert view.columns == ["status", "workflow_id", "run_id", "duration"]

    page = owner.get(f"{base}/workflows?view={view.id}").content.decode()
    assert "<script>window.__x=1</script>" not in page
    assert "&lt;script&gt;window.__x=1&lt;/script&gt; &quot;late&quot; runs" in page
    assert 'value="WorkflowType = &quot;&lt;b&gt;x&lt;/b&gt;&quot;"' in page

    # The reader sees none of it, cannot open it (the view id means nothing to them) nor delete it.
    listed = reader.get(f"{base}/workflows").content.decode()
    assert "late" not in listed
    theirs = reader.get(f"{base}/workflows?view={view.id}").content.decode()
    assert "&lt;b&gt;x&lt;/b&gt;" not in theirs
    assert reader.post(f"{base}/saved-views/{view.id}/delete").status_code == 404
    assert SavedView.objects.filter(id=view.id).exists()

    # Columns: the reader's choice is theirs; the owner's list keeps the default.
    assert reader.post(f"{base}/list-columns", {"column": ["history_length"]}).status_code == 302
    assert ListColumns.objects.get(namespace=world.namespace).columns == [
        "status",
        "workflow_id",
        "history_length",
    ]
    header = '<th scope="col" class="num">History length</th>'
    assert header in reader.get(f"{base}/workflows").content.decode()
    assert header not in owner.get(f"{base}/workflows").content.decode()

    # A refused name comes back as the list's message, by its code only.
    refused = owner.post(base + "/saved-views", {"name": "  ", "query": "x"})
    assert refused["Location"] == f"{base}/workflows?query=x&view_error=name"
    assert "a saved view needs a name" in owner.get(refused["Location"]).content.decode()
    assert 'id="view-error"' not in owner.get(f"{base}/workflows?view_error=hello").content.decode()
    assert owner.post(f"{base}/saved-views/{view.id}/delete").status_code == 302
    assert not SavedView.objects.filter(id=view.id).exists()
    assert owner.post(f"{base}/saved-views/{uuid.uuid4()}/delete").status_code == 404
