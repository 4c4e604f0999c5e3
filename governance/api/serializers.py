"""Governance serializers: tools as the API shows them, approvals, tokens, audit events."""

import json

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from catalog.api.serializers import ToolRevisionSerializer
from catalog.models import Tool
from catalog.services.phrases import MAX_PHRASE_CHARS, MAX_PHRASES
from governance.choices import ApprovalStatus, AuditEventType, AuditOutcome
from governance.models import ApiToken, ApprovalRequest, AuditEvent
from governance.modeltext import definition_for_model, text_for_model, texts_for_model
from governance.selectors import audit_payload_shown, delegation_chain_shown


def _policy(tool: Tool):
    return getattr(tool, "policy", None)


# A tool's texts on its REST pages, upstream's (the description, the definition) and curators' alike. A person reviewing
# a definition reads it as written; a token acting for an agent reads what the MCP path shows a model (redteam53, T9):
# the REST search's low-confidence answer sends an agent to ``tools/{tool_id}/`` for the input schema.
MODEL_TEXTS = ("display_title", "description", "purpose")
MODEL_TEXT_TREES = ("hold", "curation")


def tool_page_for_model(data: dict) -> dict:
    """A tool's page (list row, detail, a revision) with every text cleaned as the MCP path cleans it
    (``governance.modeltext``); ids, hashes, times, classes and the definition's name as written."""
    shown = dict(data)
    for key in MODEL_TEXTS:
        if isinstance(shown.get(key), str):
            shown[key] = text_for_model(shown[key])
    for key in MODEL_TEXT_TREES:
        if key in shown:
            shown[key] = texts_for_model(shown[key])
    if "definition" in shown:
        shown["definition"] = definition_for_model(shown["definition"])
    return shown


class ForModel:
    """A serializer whose rows a token acting for an agent reads as a model is shown them (``tool_page_for_model``):
    the view says so in its context (``for_model``)."""

    def to_representation(self, instance) -> dict:
        data = super().to_representation(instance)
        return tool_page_for_model(data) if self.context.get("for_model") else data


class ToolSerializer(ForModel, serializers.ModelSerializer):
    server = serializers.CharField(source="server.slug", read_only=True)
    display_title = serializers.CharField(read_only=True)
    risk = serializers.SerializerMethodField()
    operation_class = serializers.SerializerMethodField()
    held = serializers.SerializerMethodField()

    class Meta:
        model = Tool
        fields = (
            "tool_id",
            "server",
            "name",
            "display_title",
            "description",
            "purpose",
            "enabled",
            "held",
            "risk",
            "operation_class",
            "definition_hash",
            "first_seen_at",
            "last_seen_at",
            "removed_at",
            "curated_at",
        )
        read_only_fields = fields

    def get_risk(self, tool: Tool) -> str | None:
        policy = _policy(tool)
        return policy.risk_class.name if policy else None

    def get_operation_class(self, tool: Tool) -> str | None:
        policy = _policy(tool)
        return policy.operation_class if policy else None

    def get_held(self, tool: Tool) -> bool:
        policy = _policy(tool)
        return bool(policy and policy.held)


class PolicySerializer(serializers.Serializer):
    risk = serializers.CharField(source="risk_class.name")
    operation_class = serializers.CharField()
    reversibility = serializers.CharField()
    allowed_environments = serializers.ListField(child=serializers.CharField())
    data_classes = serializers.ListField(child=serializers.CharField())
    classified_by_admin = serializers.BooleanField()


class HoldSerializer(serializers.Serializer):
    held = serializers.BooleanField()
    reason = serializers.CharField(source="hold_reason")
    markers = serializers.ListField(child=serializers.JSONField())


class CurationSerializer(serializers.Serializer):
    """Curated text. On write, a phrase list replaces the stored one; a field left out is left as is."""

    title = serializers.CharField(max_length=200, required=False, allow_blank=True)
    purpose = serializers.CharField(required=False, allow_blank=True)
    aliases = serializers.ListField(
        child=serializers.CharField(max_length=MAX_PHRASE_CHARS), max_length=MAX_PHRASES, required=False
    )
    keywords = serializers.ListField(
        child=serializers.CharField(max_length=MAX_PHRASE_CHARS), max_length=MAX_PHRASES, required=False
    )
    examples = serializers.ListField(
        child=serializers.CharField(max_length=MAX_PHRASE_CHARS),
        max_length=MAX_PHRASES,
        required=False,
        help_text="Example requests the tool serves",
    )
    negative_queries = serializers.ListField(
        child=serializers.CharField(max_length=MAX_PHRASE_CHARS),
        max_length=MAX_PHRASES,
        required=False,
        help_text="Requests the tool must not be chosen for",
    )

    @staticmethod
    def of(tool: Tool) -> dict:
        return {
            "title": tool.title,
            "purpose": tool.purpose,
            "aliases": [p.text for p in tool.aliases.order_by("id")],
            "keywords": [p.text for p in tool.keywords.order_by("id")],
            "examples": [p.text for p in tool.examples.order_by("id")],
            "negative_queries": [p.text for p in tool.negative_examples.order_by("id")],
        }


class ToolDetailSerializer(ToolSerializer):
    definition = serializers.SerializerMethodField(help_text="The upstream definition (untrusted upstream text)")
    policy = serializers.SerializerMethodField()
    hold = serializers.SerializerMethodField()
    curation = serializers.SerializerMethodField()
    revision_count = serializers.SerializerMethodField()

    class Meta(ToolSerializer.Meta):
        fields = (*ToolSerializer.Meta.fields, "definition", "policy", "hold", "curation", "revision_count")
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_definition(self, tool: Tool) -> dict:
        return tool.upstream_definition()

    @extend_schema_field(PolicySerializer(allow_null=True))
    def get_policy(self, tool: Tool) -> dict | None:
        policy = _policy(tool)
        return PolicySerializer(policy).data if policy else None

    @extend_schema_field(HoldSerializer)
    def get_hold(self, tool: Tool) -> dict:
        policy = _policy(tool)
        if policy is None:
            return {"held": False, "reason": "", "markers": []}
        return HoldSerializer(policy).data

    @extend_schema_field(CurationSerializer)
    def get_curation(self, tool: Tool) -> dict:
        return CurationSerializer.of(tool)

    def get_revision_count(self, tool: Tool) -> int:
        return tool.revisions.count()


class ToolRevisionShownSerializer(ForModel, ToolRevisionSerializer):
    """A tool's revision (``ToolRevisionSerializer``), its definition cleaned for a token acting for an agent."""


class ApprovalSerializer(serializers.ModelSerializer):
    """A request of ``approval_requests_for_approver``: another tenant's person is someone in another tenant, their
    agent an agent in another tenant."""

    tool_id = serializers.CharField(source="tool.tool_id", read_only=True)
    requester = serializers.CharField(source="requester_shown", read_only=True)
    agent = serializers.CharField(source="agent_shown", read_only=True)
    decided_by = serializers.CharField(source="decided_by_shown", read_only=True, allow_null=True)
    delegation_chain = serializers.SerializerMethodField()
    arguments = serializers.SerializerMethodField(help_text="The exact arguments of the call to decide on")
    policy_version = serializers.IntegerField(source="policy_version.number", read_only=True)
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = ApprovalRequest
        fields = (
            "approval_id",
            "status",
            "tool_id",
            "requester",
            "agent",
            "tenant",
            "delegation_chain",
            "arguments",
            "arguments_digest",
            "risk_class",
            "operation_class",
            "policy_version",
            "created_at",
            "expires_at",
            "decided_by",
            "decided_at",
            "decision_reason",
        )
        read_only_fields = fields

    def get_delegation_chain(self, request: ApprovalRequest) -> list[str]:
        return delegation_chain_shown(request.delegation_chain, person_visible=request.requester_visible)

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_arguments(self, request: ApprovalRequest) -> dict:
        return json.loads(request.arguments_json)


class ApprovalDecisionSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class DenialSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000, help_text="Required: why the call is denied")


# Requests one bulk denial may name: a page of the inbox is 50 (the admin's), a looping agent's burst a few more.
MAX_BULK_DENIALS = 100


class BulkDenialSerializer(serializers.Serializer):
    approval_ids = serializers.ListField(
        child=serializers.CharField(max_length=64),
        min_length=1,
        max_length=MAX_BULK_DENIALS,
        help_text=f"The requests to deny (at most {MAX_BULK_DENIALS}), each from your inbox",
    )
    reason = serializers.CharField(max_length=2000, help_text="Required: why the calls are denied (each agent is told)")


class BulkDenialOutcomeSerializer(serializers.Serializer):
    approval_id = serializers.CharField()
    outcome = serializers.ChoiceField(
        choices=["denied", "not_found", "not_pending", "expired", "self_approval"],
        help_text="denied; else why not: not_found (not in your inbox), not_pending (decided meanwhile), expired, "
        "self_approval (your own request, or one made with a token you issued)",
    )


class BulkDenialResultSerializer(serializers.Serializer):
    denied = serializers.IntegerField(help_text="How many of the requests were denied")
    results = BulkDenialOutcomeSerializer(many=True, help_text="Each request named, in the order given")


APPROVAL_STATUS_FILTERS = (*ApprovalStatus.values, "all")


class ApiTokenSerializer(serializers.ModelSerializer):
    active = serializers.SerializerMethodField()
    agent = serializers.SlugRelatedField(slug_field="name", read_only=True)
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = ApiToken
        fields = (
            "id",
            "name",
            "display_prefix",
            "agent",
            "tenant",
            "scopes",
            "created_at",
            "expires_at",
            "last_used_at",
            "revoked_at",
            "active",
        )
        read_only_fields = fields

    def get_active(self, token: ApiToken) -> bool:
        return token.revoked_at is None and token.expires_at > timezone.now()


class ApiTokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    scopes = serializers.ListField(
        child=serializers.CharField(max_length=220),
        min_length=1,
        help_text='e.g. ["api", "discover"]; "server:<slug>" limits the token to that server',
    )
    expires_at = serializers.DateTimeField(help_text="With a time zone, in the future")
    agent = serializers.CharField(
        max_length=200, required=False, allow_blank=True, default="", help_text="The name of one of your agents"
    )
    tenant = serializers.CharField(
        max_length=50, required=False, allow_blank=True, default="", help_text="The slug of a tenant you belong to"
    )


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    token = serializers.CharField(help_text="The raw token: shown in this response only, never again")

    class Meta(ApiTokenSerializer.Meta):
        fields = (*ApiTokenSerializer.Meta.fields, "token")
        read_only_fields = fields


class AuditEventSerializer(serializers.ModelSerializer):
    """An event of ``audit_events_visible_to``: another tenant's person is someone in another tenant, their agent an
    agent in another tenant (Z12)."""

    user = serializers.CharField(source="subject_shown", read_only=True)
    agent = serializers.CharField(source="agent_shown", read_only=True)
    tool = serializers.CharField(source="tool_ref", read_only=True)
    token_ref = serializers.SerializerMethodField()
    delegation_chain = serializers.SerializerMethodField()
    payload = serializers.SerializerMethodField()

    class Meta:
        model = AuditEvent
        fields = (
            "id",
            "created_at",
            "event_type",
            "outcome",
            "user",
            "token_ref",
            "agent",
            "tenant",
            "delegation_chain",
            "target_server",
            "tool",
            "tool_definition_hash",
            "environment",
            "policy_version",
            "approval_ref",
            "trace_id",
            "payload",
        )
        read_only_fields = fields

    def get_token_ref(self, event: AuditEvent) -> str:
        return event.token_ref if event.subject_visible else ""  # it groups a masked person's events as a name would

    def get_delegation_chain(self, event: AuditEvent) -> list[str]:
        return delegation_chain_shown(event.delegation_chain, person_visible=event.subject_visible)

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_payload(self, event: AuditEvent) -> dict:
        return audit_payload_shown(event, viewer=self.context["request"].user)


AUDIT_EVENT_TYPES = AuditEventType.values
AUDIT_OUTCOMES = AuditOutcome.values
