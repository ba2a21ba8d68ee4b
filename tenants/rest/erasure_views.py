"""REST: erasure by key destruction of a data subject (engine/exports/erasure.py), for namespace admins."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.response import Response

from tenants import access
from tenants.rest.permissions import Need
from tenants.rest.views import _View


class SubjectEraseView(_View):
    """Destroy the key of the data subject named in `subject` (the runs' `PerduraDataSubject`): every
    payload it sealed becomes unreadable, its running runs are terminated, and the erasure is audited
    as `subject.erase` with the person or key that asked. Admins of the namespace only; another
    tenant's namespace answers 404."""

    needs = {"POST": Need.NAMESPACE_ADMIN}

    @extend_schema(
        request=inline_serializer("SubjectErase", {"subject": serializers.CharField(max_length=2048)}),
        responses={200: dict},
    )
    def post(self, request, namespace_id):
        from engine.exports import erasure

        namespace = access.namespace_get(self.actor, namespace_id)
        self.check_object_permissions(request, namespace)
        subject = request.data.get("subject") if isinstance(request.data, dict) else None
        if not isinstance(subject, str) or not subject or len(subject) > erasure.MAX_SUBJECT_LENGTH:
            raise exceptions.ValidationError(
                {"subject": [f"name the subject: 1 to {erasure.MAX_SUBJECT_LENGTH} characters"]}
            )
        done = erasure.subject_erase(namespace=namespace, subject=subject)
        return Response(
            {
                "subject": done.subject,
                "destroyed_keys": done.key_ids,
                "terminated_runs": [{"workflow_id": w, "run_id": r} for w, r in done.terminated],
            }
        )
