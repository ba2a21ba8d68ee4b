"""Console URLs, shaped as the Temporal UI's so the links people share keep working.

A workflow id may hold slashes, so it is matched greedily up to the run id and `/history`.
"""

from django.urls import path, re_path

from frontend.tenant_views import accounts, audit_log, compliance, keys, members, namespaces, pages
from frontend.tenant_views import settings as namespace_settings
from frontend.views import (
    actions,
    auth,
    batches,
    export,
    home,
    interactive,
    metrics,
    reset,
    runs,
    saved_views,
    schedule_forms,
    schedules,
    workflows,
)
from frontend.views import timeline as timeline_views

urlpatterns = [
    path("", home.home, name="console-home"),
    path("metrics", metrics.metrics_page, name="metrics"),
    path("login/", auth.login_page, name="console-login"),
    path("logout/", auth.logout_page, name="console-logout"),
    # Accounts and the organisation's pages (frontend/tenant_views/), over the REST API's services.
    path("signup/", accounts.signup_page, name="console-signup"),
    path("signup/confirm/", accounts.signup_confirm_page, name="console-signup-confirm"),
    path("password-reset/", accounts.password_reset_page, name="console-password-reset"),
    path(
        "password-reset/confirm/", accounts.password_reset_confirm_page, name="console-password-reset-confirm"
    ),
    path("invitations/accept/", accounts.invitation_accept_page, name="console-invitation-accept"),
    path("organization/switch", pages.organization_switch, name="console-org-switch"),
    path("namespaces", namespaces.namespaces_page, name="console-namespaces"),
    path("organization/members", members.members_page, name="console-members"),
    path("organization/members/<int:member_id>/role", members.member_role, name="console-member-role"),
    path("organization/members/<int:member_id>/remove", members.member_remove, name="console-member-remove"),
    path("organization/members/<int:member_id>/access", members.member_access, name="console-member-access"),
    path("organization/invitations", members.invitation_send, name="console-invitations"),
    path(
        "organization/invitations/<uuid:invitation_id>/revoke",
        members.invitation_revoke,
        name="console-invitation-revoke",
    ),
    path(
        "organization/invitations/<uuid:invitation_id>/resend",
        members.invitation_resend,
        name="console-invitation-resend",
    ),
    path("organization/audit", audit_log.audit_page, name="console-audit"),
    path("organization/audit/export", audit_log.audit_export, name="console-audit-export"),
    path("organization/api-keys", keys.api_keys_page, name="console-api-keys"),
    path("organization/api-keys/<uuid:key_id>/revoke", keys.api_key_revoke, name="console-api-key-revoke"),
    path("organization/api-keys/<uuid:key_id>/rotate", keys.api_key_rotate, name="console-api-key-rotate"),
    path(
        "namespaces/<str:namespace>/settings",
        namespace_settings.settings_page,
        name="console-namespace-settings",
    ),
    path(
        "namespaces/<str:namespace>/settings/archival",
        namespace_settings.archival_settings,
        name="console-namespace-archival",
    ),
    path("namespaces/<str:namespace>/settings/erase", compliance.erase, name="console-namespace-erase"),
    path(
        "namespaces/<str:namespace>/settings/data-key", compliance.data_key, name="console-namespace-data-key"
    ),
    path(
        "namespaces/<str:namespace>/settings/data-key/rotate",
        compliance.rotate_key,
        name="console-namespace-rotate-key",
    ),
    path(
        "namespaces/<str:namespace>/settings/data-key/reencrypt",
        compliance.reencrypt,
        name="console-namespace-reencrypt",
    ),
    path(
        "namespaces/<str:namespace>/settings/search-attributes",
        namespace_settings.search_attribute_add,
        name="console-namespace-sa-add",
    ),
    path(
        "namespaces/<str:namespace>/settings/search-attributes/remove",
        namespace_settings.search_attribute_remove,
        name="console-namespace-sa-remove",
    ),
    path(
        "namespaces/<str:namespace>/settings/deprecate",
        namespace_settings.deprecate,
        name="console-namespace-deprecate",
    ),
    path(
        "namespaces/<str:namespace>/settings/delete",
        namespace_settings.delete,
        name="console-namespace-delete",
    ),
    path("namespaces/<str:namespace>/workflows", workflows.workflows, name="console-workflows"),
    # The list's remembered columns and saved views (frontend/views/saved_views.py), outside
    # workflows/... where a workflow id could take any name.
    path("namespaces/<str:namespace>/list-columns", saved_views.list_columns, name="console-list-columns"),
    path("namespaces/<str:namespace>/saved-views", saved_views.view_save, name="console-view-save"),
    path(
        "namespaces/<str:namespace>/saved-views/<str:view_id>/delete",
        saved_views.view_delete,
        name="console-view-delete",
    ),
    re_path(
        r"^namespaces/(?P<namespace>[^/]+)/workflows/(?P<workflow_id>.+)/(?P<run_id>[^/]+)/history$",
        runs.run_history,
        name="console-run",
    ),
    # Actions and interactive reads on a run (frontend/views/actions.py, reset.py, interactive.py).
    *[
        re_path(
            r"^namespaces/(?P<namespace>[^/]+)/workflows/(?P<workflow_id>.+)/(?P<run_id>[^/]+)/"
            + suffix
            + "$",
            view,  # type: ignore[arg-type]  # sync and async views in one list join to Callable[..., object]
            name=f"console-run-{name}",
        )
        for suffix, view, name in [
            ("actions", actions.bar, "bar"),
            ("cancel", actions.cancel, "cancel"),
            ("terminate", actions.terminate, "terminate"),
            ("signal", actions.signal, "signal"),
            ("query", interactive.query, "query"),
            ("stack-trace", interactive.stack_trace, "stack-trace"),
            ("update", interactive.update, "update"),
            ("reset", reset.reset_form, "reset-form"),
            ("reset/preview", reset.reset_preview_part, "reset-preview"),
            ("reset/run", reset.reset, "reset"),
        ]
    ],
    # The run page's timeline, export and the schedules pages (console-timeline).
    re_path(
        r"^namespaces/(?P<namespace>[^/]+)/workflows/(?P<workflow_id>.+)/(?P<run_id>[^/]+)/timeline$",
        timeline_views.run_timeline,
        name="console-run-timeline",
    ),
    re_path(
        r"^namespaces/(?P<namespace>[^/]+)/workflows/(?P<workflow_id>.+)/(?P<run_id>[^/]+)/export$",
        export.run_export,
        name="console-run-export",
    ),
    path("namespaces/<str:namespace>/schedules", schedules.schedule_list, name="console-schedules"),
    # Outside schedules/..., where a schedule id could take any name (as the Temporal UI's create-schedule).
    path(
        "namespaces/<str:namespace>/create-schedule",
        schedule_forms.schedule_create,
        name="console-schedule-create",
    ),
    re_path(
        r"^namespaces/(?P<namespace>[^/]+)/schedules/(?P<schedule_id>.+)/edit$",
        schedule_forms.schedule_edit,
        name="console-schedule-edit",
    ),
    re_path(
        r"^namespaces/(?P<namespace>[^/]+)/schedules/(?P<schedule_id>.+)/delete$",
        schedule_forms.schedule_delete,
        name="console-schedule-delete",
    ),
    re_path(
        r"^namespaces/(?P<namespace>[^/]+)/schedules/(?P<schedule_id>.+)/(?P<action>pause|unpause|trigger|backfill)$",
        schedules.schedule_action,
        name="console-schedule-action",
    ),
    re_path(
        r"^namespaces/(?P<namespace>[^/]+)/schedules/(?P<schedule_id>.+)$",
        schedules.schedule_detail,
        name="console-schedule",
    ),
    path("namespaces/<str:namespace>/batch-operations", batches.batch_list, name="console-batches"),
    path("namespaces/<str:namespace>/batch-operations/new", batches.batch_new, name="console-batch-new"),
    re_path(
        r"^namespaces/(?P<namespace>[^/]+)/batch-operations/(?P<job_id>.+)/stop$",
        batches.batch_stop,
        name="console-batch-stop",
    ),
    re_path(
        r"^namespaces/(?P<namespace>[^/]+)/batch-operations/(?P<job_id>.+)$",
        batches.batch_detail,
        name="console-batch",
    ),
]
