"""Routes of the REST API, mounted at /api/v1/."""

from django.urls import path, re_path

from tenants.rest import audit_views, erasure_views, export_views, views

urlpatterns = [
    path("auth/csrf/", views.CsrfView.as_view(), name="api-csrf"),
    path("auth/signup/", views.SignupView.as_view(), name="api-signup"),
    path("auth/signup/confirm/", views.SignupConfirmView.as_view(), name="api-signup-confirm"),
    path("auth/login/", views.LoginView.as_view(), name="api-login"),
    path("auth/logout/", views.LogoutView.as_view(), name="api-logout"),
    path("auth/me/", views.MeView.as_view(), name="api-me"),
    path("auth/password-reset/", views.PasswordResetView.as_view(), name="api-password-reset"),
    path(
        "auth/password-reset/confirm/",
        views.PasswordResetConfirmView.as_view(),
        name="api-password-reset-confirm",
    ),
    path("invitations/accept/", views.InvitationAcceptView.as_view(), name="api-invitation-accept"),
    path("organization/", views.OrganizationView.as_view(), name="api-organization"),
    path("members/", views.MemberListView.as_view(), name="api-members"),
    path("members/<int:member_id>/", views.MemberView.as_view(), name="api-member"),
    path("invitations/", views.InvitationListView.as_view(), name="api-invitations"),
    path("invitations/<uuid:invitation_id>/", views.InvitationView.as_view(), name="api-invitation"),
    path("namespaces/", views.NamespaceListView.as_view(), name="api-namespaces"),
    path("namespaces/<uuid:namespace_id>/", views.NamespaceView.as_view(), name="api-namespace"),
    path(
        "namespaces/<uuid:namespace_id>/deprecate/",
        views.NamespaceDeprecateView.as_view(),
        name="api-namespace-deprecate",
    ),
    path(
        "namespaces/<uuid:namespace_id>/access/",
        views.NamespaceAccessListView.as_view(),
        name="api-namespace-access",
    ),
    path(
        "namespaces/<uuid:namespace_id>/access/<int:member_id>/",
        views.NamespaceAccessView.as_view(),
        name="api-namespace-grant",
    ),
    path(
        "namespaces/<uuid:namespace_id>/export/run/",
        export_views.RunExportView.as_view(),
        name="api-namespace-export-run",
    ),
    path(
        "namespaces/<uuid:namespace_id>/erase/",
        erasure_views.SubjectEraseView.as_view(),
        name="api-namespace-erase",
    ),
    path("api-keys/", views.ApiKeyListView.as_view(), name="api-keys"),
    path("api-keys/<uuid:key_id>/", views.ApiKeyView.as_view(), name="api-key"),
    path("api-keys/<uuid:key_id>/revoke/", views.ApiKeyRevokeView.as_view(), name="api-key-revoke"),
    path("api-keys/<uuid:key_id>/rotate/", views.ApiKeyRotateView.as_view(), name="api-key-rotate"),
    path("audit/", audit_views.AuditListView.as_view(), name="api-audit"),
    re_path(r"^audit/export/?$", audit_views.AuditExportView.as_view(), name="api-audit-export"),
]
