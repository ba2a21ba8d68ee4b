"""REST views of /api/v1/: thin transport over tenants.services, tenants.selectors and tenants.access.

Each view declares what every method needs (`needs`, enforced by permissions.Declared); objects are
fetched through tenants.access inside the caller's organisation, so other tenants' ids answer 404.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

from django.contrib.auth import authenticate, login, logout
from django.middleware.csrf import get_token
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, status
from rest_framework.authentication import SessionAuthentication as DrfSessionAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.views import APIView

from tenants import access, audit, selectors
from tenants.errors import NamespaceAlreadyExists
from tenants.models import ApiKey, Namespace
from tenants.rest import serializers as s
from tenants.rest import throttles
from tenants.rest.authentication import client_address
from tenants.rest.permissions import Need, actor_of
from tenants.roles import KeyRole
from tenants.services import invitations, keys, members, namespaces, organizations, people, signup

log = logging.getLogger("perdura.rest")


class _View(APIView):
    needs: dict[str, Need] = {}
    _audit_token = None

    @property
    def actor(self) -> access.Actor:
        actor = actor_of(self.request)
        if actor is None:  # the view's needs let no one without an actor this far
            raise exceptions.NotAuthenticated()
        return actor

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # Control-plane services record their changes as this actor, from this address (tenants/audit.py).
        # (Anonymous callers are not resolved: sign-up and login resolve their actor once signed in.)
        user = request.user
        actor = actor_of(request) if user is not None and user.is_authenticated else None
        self._audit_token = audit.bind(
            audit.AuditContext(actor=_audit_actor(actor), source=client_address(request), via="rest")
        )

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        # Only an actor already resolved: resolving one now would re-run a failed authentication. Not a
        # throttled call either (429): a flood would become as many inserts, as on the gRPC API.
        status_code = response.status_code
        actor = getattr(self.request, "_perdura_actor", None) if status_code != 429 else None
        if actor is not None and self.request.method not in ("GET", "HEAD", "OPTIONS"):
            # A refused or failed change is recorded too (a successful one is recorded by its service).
            audit.record(
                action=f"{self.request.method} {type(self).__name__}",
                target=self.request.path,
                organization_id=actor.organization.id,
                namespace=self._audited_namespace(actor),
                outcome=audit.DENIED if status_code in (401, 403) else audit.FAILED,
                code=str(status_code),
                context=audit.AuditContext(
                    actor=_audit_actor(actor), source=client_address(self.request), via="rest"
                ),
            )
        return response

    def _audited_namespace(self, actor: access.Actor) -> Namespace | None:
        """The namespace of the URL, if it is one of the actor's organisation (its admins read its log)."""
        try:
            namespace_id = uuid.UUID(str(self.kwargs.get("namespace_id", "")))
        except ValueError:
            return None
        return selectors.namespace_of_organization(organization=actor.organization, namespace_id=namespace_id)

    def finalize_response(self, request, response, *args, **kwargs):
        if self._audit_token is not None:
            audit.unbind(self._audit_token)
            self._audit_token = None
        return super().finalize_response(request, response, *args, **kwargs)


def _audit_actor(actor: access.Actor | None) -> audit.AuditActor:
    if actor is None:
        return audit.AuditActor(kind=audit.USER, label="anonymous")
    if actor.key is not None:
        return audit.key_actor(actor.key.prefix, actor.key.key_name)
    return audit.user_actor(actor.user)


class _CsrfAlways(_View):
    """CSRF on anonymous account writes too (login CSRF, sign-up into an attacker's account)."""

    def initial(self, request, *args, **kwargs):
        if request.method not in ("GET", "HEAD", "OPTIONS") and "HTTP_AUTHORIZATION" not in request.META:
            DrfSessionAuthentication().enforce_csrf(request)
        super().initial(request, *args, **kwargs)


def _me(request: Request) -> dict[str, Any]:
    # A person signed in: MeView needs one, and sign-up and invitation acceptance sign in first.
    user: Any = request.user
    memberships = selectors.membership_list_of_user(user=user)
    actor = actor_of(request)
    return {
        "user": {"id": user.pk, "email": user.email},
        "organization": s.OrganizationOut(actor.organization).data if actor else None,
        "role": actor.org_role.value if actor and actor.org_role else None,
        "organizations": [{"slug": m.organization.slug, "role": m.role} for m in memberships],
    }


# --- accounts ------------------------------------------------------------------------------------


class CsrfView(_View):
    """Sets the `csrftoken` cookie; send its value as `X-CSRFToken` on every write made with a session."""

    needs = {"GET": Need.PUBLIC}

    @extend_schema(responses={200: dict})
    def get(self, request):
        return Response({"csrf_token": get_token(request)})


class SignupView(_CsrfAlways):
    """Sign up: always 202 with no body once the input is valid, as password reset answers, so no one can
    learn whether an email has an account. A new address gets a confirmation link by email (which creates
    the organisation and signs in: `auth/signup/confirm/`); an address with an account gets an email
    saying so."""

    needs = {"POST": Need.PUBLIC}
    throttle_classes = [throttles.SignupThrottle]

    @extend_schema(request=s.SignupIn, responses={202: None})
    def post(self, request):
        data = _valid(s.SignupIn, request.data)
        signup.signup(
            email=data["email"],
            password=data["password"],
            organization_slug=data["organization"],
            organization_name=data["organization_name"],
        )
        log.info(
            "sign-up requested for organisation %s from %s", data["organization"], client_address(request)
        )
        return Response(status=status.HTTP_202_ACCEPTED)


class SignupConfirmView(_CsrfAlways):
    """POST the emailed token: the person's account becomes active, owns the new organisation, signs in."""

    needs = {"POST": Need.PUBLIC}
    throttle_classes = [throttles.PasswordResetThrottle]

    @extend_schema(request=s.SignupConfirmIn, responses={201: s.MeOut})
    def post(self, request):
        # The new organisation's first entries name the new person (signup.signup_confirm binds them).
        membership = signup.signup_confirm(token=_valid(s.SignupConfirmIn, request.data)["token"])
        login(request, membership.user, backend="django.contrib.auth.backends.ModelBackend")
        log.info("sign-up: organisation %s from %s", membership.organization.slug, client_address(request))
        return Response(_me(request), status=status.HTTP_201_CREATED)


class LoginView(_CsrfAlways):
    """Log in with email and password (a session cookie). Throttled per address and per account."""

    needs = {"POST": Need.PUBLIC}
    throttle_classes = [throttles.LoginThrottle, throttles.LoginAccountThrottle]

    @extend_schema(request=s.LoginIn, responses={200: s.MeOut})
    def post(self, request):
        data = _valid(s.LoginIn, request.data)
        user = authenticate(request, username=data["email"].strip().lower(), password=data["password"])
        if user is None:
            log.info("failed login from %s", client_address(request))
            raise exceptions.AuthenticationFailed("wrong email or password")
        login(request, user)
        return Response(_me(request))


class LogoutView(_CsrfAlways):
    needs = {"POST": Need.PUBLIC}

    @extend_schema(request=None, responses={204: None})
    def post(self, request):
        logout(request)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MeView(_View):
    """Who is signed in, their current organisation (`X-Perdura-Organization` picks one) and all of them."""

    needs = {"GET": Need.PERSON}

    @extend_schema(responses={200: s.MeOut})
    def get(self, request):
        return Response(_me(request))


class PasswordResetView(_CsrfAlways):
    """Email a password reset link (always 202: no account probing)."""

    needs = {"POST": Need.PUBLIC}
    throttle_classes = [throttles.PasswordResetThrottle]

    @extend_schema(request=s.PasswordResetIn, responses={202: None})
    def post(self, request):
        people.password_reset_request(email=_valid(s.PasswordResetIn, request.data)["email"])
        return Response(status=status.HTTP_202_ACCEPTED)


class PasswordResetConfirmView(_CsrfAlways):
    needs = {"POST": Need.PUBLIC}
    throttle_classes = [throttles.PasswordResetThrottle]

    @extend_schema(request=s.PasswordResetConfirmIn, responses={204: None})
    def post(self, request):
        data = _valid(s.PasswordResetConfirmIn, request.data)
        people.password_reset_confirm(uid=data["uid"], token=data["token"], password=data["password"])
        return Response(status=status.HTTP_204_NO_CONTENT)


class InvitationAcceptView(_CsrfAlways):
    """GET shows the invitation of `?token=`; POST accepts it with a password (new or the account's)."""

    needs = {"GET": Need.PUBLIC, "POST": Need.PUBLIC}
    throttle_classes = [throttles.PasswordResetThrottle]

    @extend_schema(
        parameters=[OpenApiParameter("token", str, required=True)], responses={200: s.InvitationPreviewOut}
    )
    def get(self, request):
        invitation = selectors.invitation_find(token=request.query_params.get("token", ""))
        if invitation is None:
            raise exceptions.NotFound("this invitation is not valid (unknown, used, revoked or expired)")
        return Response(s.InvitationPreviewOut(invitation).data)

    @extend_schema(request=s.InvitationAcceptIn, responses={200: s.MeOut})
    def post(self, request):
        data = _valid(s.InvitationAcceptIn, request.data)
        membership = invitations.invitation_accept(token=data["token"], password=data["password"])
        login(request, membership.user, backend="django.contrib.auth.backends.ModelBackend")
        request.META["HTTP_X_PERDURA_ORGANIZATION"] = membership.organization.slug
        return Response(_me(request))


# --- organisation and members ---------------------------------------------------------------------


class OrganizationView(_View):
    """The current organisation."""

    needs = {"GET": Need.MEMBER, "PATCH": Need.ORG_ADMIN}

    @extend_schema(responses={200: s.OrganizationOut})
    def get(self, request):
        return Response(s.OrganizationOut(self.actor.organization).data)

    @extend_schema(request=s.OrganizationIn, responses={200: s.OrganizationOut})
    def patch(self, request):
        data = _valid(s.OrganizationIn, request.data)
        return Response(
            s.OrganizationOut(organizations.organization_update(actor=self.actor, name=data["name"])).data
        )


class MemberListView(_View):
    needs = {"GET": Need.PERSON}

    @extend_schema(responses={200: s.MemberOut(many=True)})
    def get(self, request):
        found = selectors.member_list(organization=self.actor.organization)
        return Response(s.MemberOut(found, many=True).data)


class MemberView(_View):
    """One member: change their organisation role, or remove them (their keys are revoked)."""

    needs = {"GET": Need.PERSON, "PATCH": Need.ORG_ADMIN, "DELETE": Need.ORG_ADMIN}

    @extend_schema(responses={200: s.MemberOut})
    def get(self, request, member_id):
        return Response(s.MemberOut(access.membership_get(self.actor, member_id)).data)

    @extend_schema(request=s.MemberIn, responses={200: s.MemberOut})
    def patch(self, request, member_id):
        membership = access.membership_get(self.actor, member_id)
        role = _valid(s.MemberIn, request.data)["role"]
        return Response(
            s.MemberOut(members.member_set_role(actor=self.actor, membership=membership, role=role)).data
        )

    @extend_schema(responses={204: None})
    def delete(self, request, member_id):
        members.member_remove(actor=self.actor, membership=access.membership_get(self.actor, member_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class InvitationListView(_View):
    """Invitations of the organisation; POST invites someone by email (the link goes by email only)."""

    needs = {"GET": Need.ORG_ADMIN, "POST": Need.ORG_ADMIN}

    @extend_schema(responses={200: s.InvitationOut(many=True)})
    def get(self, request):
        found = selectors.invitation_list(organization=self.actor.organization)
        return Response(s.InvitationOut(found, many=True).data)

    @extend_schema(request=s.InviteIn, responses={201: s.InvitationOut})
    def post(self, request):
        data = _valid(s.InviteIn, request.data)
        invitation, _ = invitations.invitation_create(
            actor=self.actor, email=data["email"], role=data["role"]
        )
        return Response(s.InvitationOut(invitation).data, status=status.HTTP_201_CREATED)


class InvitationView(_View):
    needs = {"GET": Need.ORG_ADMIN, "DELETE": Need.ORG_ADMIN}

    @extend_schema(responses={200: s.InvitationOut})
    def get(self, request, invitation_id):
        return Response(s.InvitationOut(access.invitation_get(self.actor, invitation_id)).data)

    @extend_schema(responses={204: None})
    def delete(self, request, invitation_id):
        invitations.invitation_revoke(
            actor=self.actor, invitation=access.invitation_get(self.actor, invitation_id)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- namespaces ----------------------------------------------------------------------------------


def _namespace_out(namespace: Namespace, role: KeyRole | str | None) -> dict[str, Any]:
    return s.NamespaceOut(namespace, context={"roles": {namespace.id: role}}).data


class NamespaceListView(_View):
    """The namespaces you have a role on; POST creates `<name>.<organisation>` with its data key."""

    needs = {"GET": Need.MEMBER, "POST": Need.NAMESPACE_CREATE}

    @extend_schema(responses={200: s.NamespaceOut(many=True)})
    def get(self, request):
        found = access.namespace_list(self.actor)
        roles = {n.id: r for n, r in found}
        return Response(s.NamespaceOut([n for n, _ in found], many=True, context={"roles": roles}).data)

    @extend_schema(request=s.NamespaceIn, responses={201: s.NamespaceOut})
    def post(self, request):
        data = _valid(s.NamespaceIn, request.data)
        actor = self.actor
        try:
            namespace = namespaces.namespace_register(
                name=namespaces.namespace_full_name(organization=actor.organization, name=data["name"]),
                organization=actor.organization,
                description=data["description"],
                retention_days=data["retention_days"],
                # As RegisterNamespace: the admin key that creates a namespace may use it.
                creator_key_id=actor.key.key_id if actor.key is not None else None,
            )
        except NamespaceAlreadyExists as e:
            raise exceptions.ValidationError({"name": [str(e)]}) from None
        log.info("namespace %s created by %s", namespace.name, actor.label)
        return Response(_namespace_out(namespace, "admin"), status=status.HTTP_201_CREATED)


class _NamespaceView(_View):
    def _get(self, namespace_id):
        """The namespace of the URL (404 outside the caller's reach), checked against the need."""
        namespace = access.namespace_get(self.actor, namespace_id)
        self.check_object_permissions(self.request, namespace)
        return namespace


class NamespaceView(_NamespaceView):
    """One namespace: describe (reader), update description/retention (admin), delete (admin)."""

    needs = {"GET": Need.NAMESPACE_READ, "PATCH": Need.NAMESPACE_ADMIN, "DELETE": Need.NAMESPACE_ADMIN}

    @extend_schema(responses={200: s.NamespaceOut})
    def get(self, request, namespace_id):
        namespace = self._get(namespace_id)
        return Response(_namespace_out(namespace, self.actor.namespace_role(namespace)))

    @extend_schema(request=s.NamespaceUpdateIn, responses={200: s.NamespaceOut})
    def patch(self, request, namespace_id):
        namespace = self._get(namespace_id)
        data = _valid(s.NamespaceUpdateIn, request.data)
        namespace = namespaces.namespace_update(namespace=namespace, **data)
        return Response(_namespace_out(namespace, self.actor.namespace_role(namespace)))

    @extend_schema(responses={204: None})
    def delete(self, request, namespace_id):
        namespace = self._get(namespace_id)
        name = namespace.name
        namespaces.namespace_delete(namespace=namespace)
        log.info("namespace %s deleted by %s", name, self.actor.label)
        return Response(status=status.HTTP_204_NO_CONTENT)


class NamespaceDeprecateView(_NamespaceView):
    needs = {"POST": Need.NAMESPACE_ADMIN}

    @extend_schema(request=None, responses={200: s.NamespaceOut})
    def post(self, request, namespace_id):
        namespace = namespaces.namespace_deprecate(namespace=self._get(namespace_id))
        return Response(_namespace_out(namespace, self.actor.namespace_role(namespace)))


class NamespaceAccessListView(_NamespaceView):
    """People's roles on the namespace (owners and admins of the organisation are admin everywhere)."""

    needs = {"GET": Need.NAMESPACE_ADMIN}

    @extend_schema(responses={200: s.GrantOut(many=True)})
    def get(self, request, namespace_id):
        return Response(
            selectors.namespace_access_list(
                organization=self.actor.organization, namespace=self._get(namespace_id)
            )
        )


class NamespaceAccessView(_NamespaceView):
    """Give a member a role on the namespace (PUT), or take it away (DELETE); namespace admins only."""

    needs = {"PUT": Need.NAMESPACE_ADMIN, "DELETE": Need.NAMESPACE_ADMIN}

    @extend_schema(request=s.GrantIn, responses={200: s.GrantOut})
    def put(self, request, namespace_id, member_id):
        namespace = self._get(namespace_id)
        membership = access.membership_get(self.actor, member_id)
        role = _valid(s.GrantIn, request.data)["role"]
        namespaces.namespace_grant(namespace=namespace, user=membership.user, role=role)
        return Response({"member": membership.id, "email": membership.user.email, "role": role})

    @extend_schema(responses={204: None})
    def delete(self, request, namespace_id, member_id):
        namespace = self._get(namespace_id)
        membership = access.membership_get(self.actor, member_id)
        namespaces.namespace_grant(namespace=namespace, user=membership.user, role=None)
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- API keys ------------------------------------------------------------------------------------


def _created(key: ApiKey, plaintext: str) -> dict[str, Any]:
    return {**s.ApiKeyOut(key).data, "key": plaintext}


class ApiKeyListView(_View):
    """Keys you may see; POST creates one (role never above yours on its namespaces), shown once."""

    needs = {"GET": Need.PERSON, "POST": Need.PERSON}

    @extend_schema(responses={200: s.ApiKeyOut(many=True)})
    def get(self, request):
        return Response(s.ApiKeyOut(access.apikey_list(self.actor), many=True).data)

    @extend_schema(request=s.ApiKeyIn, responses={201: s.ApiKeyCreatedOut})
    def post(self, request):
        data = _valid(s.ApiKeyIn, request.data)
        namespaces = [access.namespace_get(self.actor, n) for n in data["namespaces"]]
        key, plaintext = keys.apikey_create_by_person(
            actor=self.actor,
            name=data["name"],
            role=data["role"],
            namespaces=namespaces,
            expires_in=timedelta(days=data["expires_in_days"]),
            rate_limits=data["rate_limits"],
        )
        log.info("API key %s created by %s", key, self.actor.label)
        return Response(_created(key, plaintext), status=status.HTTP_201_CREATED)


class ApiKeyView(_View):
    """A key you may see; PATCH sets its own rate limits (admins of each of its namespaces)."""

    needs = {"GET": Need.PERSON, "PATCH": Need.PERSON}

    @extend_schema(responses={200: s.ApiKeyOut})
    def get(self, request, key_id):
        return Response(s.ApiKeyOut(access.apikey_get(self.actor, key_id)).data)

    @extend_schema(request=s.ApiKeyUpdateIn, responses={200: s.ApiKeyOut})
    def patch(self, request, key_id):
        data = _valid(s.ApiKeyUpdateIn, request.data)
        key = keys.apikey_set_rate_limits_by_person(
            actor=self.actor, key=access.apikey_get(self.actor, key_id), changes=data["rate_limits"]
        )
        log.info("API key %s rate limits set to %s by %s", key, key.rate_limits, self.actor.label)
        return Response(s.ApiKeyOut(key).data)


class ApiKeyRevokeView(_View):
    """Revoke a key: refused on its next call, REST or gRPC."""

    needs = {"POST": Need.PERSON}

    @extend_schema(request=None, responses={200: s.ApiKeyOut})
    def post(self, request, key_id):
        key = keys.apikey_revoke(key=access.apikey_get(self.actor, key_id))
        log.info("API key %s revoked by %s", key, self.actor.label)
        return Response(s.ApiKeyOut(key).data)


class ApiKeyRotateView(_View):
    """Replace a key by a new one with the same grants (shown once); the old one stops after the grace."""

    needs = {"POST": Need.PERSON}

    @extend_schema(request=s.RotateIn, responses={201: s.ApiKeyCreatedOut})
    def post(self, request, key_id):
        key = access.apikey_get(self.actor, key_id)
        grace = timedelta(seconds=_valid(s.RotateIn, request.data)["grace_seconds"])
        successor, plaintext = keys.apikey_rotate_by_person(actor=self.actor, key=key, grace=grace)
        log.info("API key %s rotated to %s by %s", key, successor, self.actor.label)
        return Response(_created(successor, plaintext), status=status.HTTP_201_CREATED)


def _valid(serializer_class: type[Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
