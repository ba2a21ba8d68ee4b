"""Request and response shapes of the REST API. Responses name API keys by prefix only: no serializer
has a field for a key's hash, a password or a data key; the plaintext key appears once, in the
answer that creates it."""

from __future__ import annotations

from rest_framework import serializers

from tenants import api_keys
from tenants.models import ApiKey, Namespace

ROLE_CHOICES = ["reader", "operator", "admin"]
ORG_ROLE_CHOICES = ["owner", "admin", "member"]


# --- requests ------------------------------------------------------------------------------------


class SignupIn(serializers.Serializer):
    email = serializers.CharField(max_length=254)
    password = serializers.CharField(max_length=128, write_only=True, style={"input_type": "password"})
    organization = serializers.CharField(max_length=40, help_text="slug: the suffix of its namespaces")
    organization_name = serializers.CharField(max_length=255, required=False, default="")


class SignupConfirmIn(serializers.Serializer):
    token = serializers.CharField(max_length=2000)


class LoginIn(serializers.Serializer):
    email = serializers.CharField(max_length=254)
    password = serializers.CharField(max_length=128, write_only=True, style={"input_type": "password"})


class PasswordResetIn(serializers.Serializer):
    email = serializers.CharField(max_length=254)


class PasswordResetConfirmIn(serializers.Serializer):
    uid = serializers.CharField(max_length=64)
    token = serializers.CharField(max_length=128)
    password = serializers.CharField(max_length=128, write_only=True, style={"input_type": "password"})


class InvitationAcceptIn(serializers.Serializer):
    token = serializers.CharField(max_length=128)
    password = serializers.CharField(max_length=128, write_only=True, style={"input_type": "password"})


class OrganizationIn(serializers.Serializer):
    name = serializers.CharField(max_length=255)


class InviteIn(serializers.Serializer):
    email = serializers.CharField(max_length=254)
    role = serializers.ChoiceField(choices=ORG_ROLE_CHOICES, default="member")


class MemberIn(serializers.Serializer):
    role = serializers.ChoiceField(choices=ORG_ROLE_CHOICES)


class NamespaceIn(serializers.Serializer):
    name = serializers.CharField(max_length=200, help_text="`orders` becomes `orders.<organisation>`")
    description = serializers.CharField(required=False, default="", allow_blank=True, max_length=10000)
    retention_days = serializers.IntegerField(required=False, default=1, min_value=1, max_value=90)


class NamespaceUpdateIn(serializers.Serializer):
    description = serializers.CharField(required=False, allow_blank=True, max_length=10000)
    owner_email = serializers.CharField(required=False, allow_blank=True, max_length=255)
    retention_days = serializers.IntegerField(required=False, min_value=1, max_value=90)
    codec_server_url = serializers.CharField(
        required=False, allow_blank=True, max_length=2048, help_text="https URL; empty for none"
    )


class GrantIn(serializers.Serializer):
    role = serializers.ChoiceField(choices=ROLE_CHOICES)


class ApiKeyIn(serializers.Serializer):
    name = serializers.CharField(max_length=255)
    role = serializers.ChoiceField(choices=ROLE_CHOICES)
    namespaces = serializers.ListField(child=serializers.UUIDField(), min_length=1, max_length=100)
    expires_in_days = serializers.IntegerField(required=False, default=90, min_value=1, max_value=730)
    rate_limits = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        required=False,
        default=dict,
        help_text="the key's own requests per second in each of its namespaces, by bucket (actions, polls, "
        "visibility); a bucket left out gets PERDURA_KEY_RATE_SHARE of the namespace's rate. Only an admin "
        "of every namespace of the key may give them.",
    )


class ApiKeyUpdateIn(serializers.Serializer):
    rate_limits = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="bucket → requests per second (null: back to the default share); buckets left out keep "
        "their value",
    )


class RotateIn(serializers.Serializer):
    grace_seconds = serializers.IntegerField(required=False, default=0, min_value=0, max_value=7 * 86400)


# --- responses ------------------------------------------------------------------------------------


class UserOut(serializers.Serializer):
    id = serializers.IntegerField()
    email = serializers.CharField()


class OrganizationOut(serializers.Serializer):
    id = serializers.UUIDField()
    slug = serializers.CharField()
    name = serializers.CharField()
    created_at = serializers.DateTimeField()


class MeOut(serializers.Serializer):
    user = UserOut()
    organization = OrganizationOut(allow_null=True)
    role = serializers.CharField(allow_null=True)
    organizations = serializers.ListField(child=serializers.DictField())


class MemberOut(serializers.Serializer):
    id = serializers.IntegerField()
    email = serializers.CharField(source="user.email")
    role = serializers.CharField()
    created_at = serializers.DateTimeField()


class InvitationOut(serializers.Serializer):
    id = serializers.UUIDField()
    email = serializers.CharField()
    role = serializers.CharField()
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    accepted_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


class InvitationPreviewOut(serializers.Serializer):
    organization = serializers.CharField(source="organization.slug")
    email = serializers.CharField()
    role = serializers.CharField()
    expires_at = serializers.DateTimeField()


class NamespaceOut(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    description = serializers.CharField()
    owner_email = serializers.CharField()
    state = serializers.SerializerMethodField()
    retention_days = serializers.IntegerField(help_text="whole days, rounded down")
    retention_seconds = serializers.SerializerMethodField(help_text="the exact retention")
    codec_server_url = serializers.CharField()
    archival = serializers.SerializerMethodField(help_text="placeholder: archival is not offered yet")
    created_at = serializers.DateTimeField()
    your_role = serializers.SerializerMethodField()

    def get_state(self, obj: Namespace) -> str:
        return Namespace.State(obj.state).name.lower()

    def get_retention_seconds(self, obj: Namespace) -> int:
        return int(obj.retention.total_seconds())

    def get_archival(self, obj: Namespace) -> dict:
        return {"history": "disabled", "visibility": "disabled"}

    def get_your_role(self, obj: Namespace) -> str | None:
        role = self.context.get("roles", {}).get(obj.id)
        return str(role) if role is not None else None


class GrantOut(serializers.Serializer):
    member = serializers.IntegerField()
    email = serializers.CharField()
    role = serializers.CharField()


class ApiKeyOut(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    prefix = serializers.SerializerMethodField(help_text="the public part that names the key: pdk_<prefix>")
    role = serializers.CharField()
    namespaces = serializers.SerializerMethodField()
    created_by = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    revoked_at = serializers.DateTimeField(allow_null=True)
    last_used_at = serializers.DateTimeField(allow_null=True)
    rotated_from = serializers.UUIDField(source="rotated_from_id", allow_null=True)
    rate_limits = serializers.DictField(
        child=serializers.FloatField(),
        help_text="the key's own rates (bucket → requests per second); other buckets: the default share",
    )

    def get_prefix(self, obj: ApiKey) -> str:
        return api_keys.display(obj.prefix)

    def get_namespaces(self, obj: ApiKey) -> list[str]:
        return sorted(n.name for n in obj.namespaces.all())

    def get_created_by(self, obj: ApiKey) -> str | None:
        return obj.created_by.email if obj.created_by is not None else None


class ApiKeyCreatedOut(ApiKeyOut):
    key = serializers.CharField(help_text="the API key: shown this once, never again")
