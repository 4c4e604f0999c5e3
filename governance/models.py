"""Governance: who may discover, call and approve which tools, and the record of what happened.

Object permissions live in direct foreign-key tables for guardian (one per target model and holder), so
they are deleted with their server or tool and a tool re-created under the same name never inherits an
old grant. Everything an agent may see is computed by ``governance.selectors`` from these tables.
"""

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import models
from guardian.models import GroupObjectPermissionBase, UserObjectPermissionBase

from catalog.models import validate_env_var_name

from .choices import (
    ApprovalStatus,
    AuditEventType,
    AuditOutcome,
    NotificationChannel,
    NotificationOutcome,
    OperationClass,
    Reversibility,
    ReviewKind,
    ReviewStatus,
    RiskLevel,
)


class AuditLogImmutable(Exception):
    """Raised on any attempt to change or delete an audit event: the trail is append-only."""


# --- object permissions (guardian direct foreign-key tables) -------------------------------------


def granted_by_field() -> models.ForeignKey:
    """Who made a grant. An ``approve`` grant never counts for the person who made it (separation of duties:
    nobody decides on authority they gave themselves); empty for grants made before this was recorded."""
    return models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )


class ServerUserObjectPermission(UserObjectPermissionBase):
    """A permission (discover/execute/approve) on one server's tools, granted to a user."""

    content_object = models.ForeignKey("catalog.Server", on_delete=models.CASCADE, related_name="user_grants")
    granted_by = granted_by_field()

    class Meta(UserObjectPermissionBase.Meta):
        verbose_name = "server grant to a user"
        verbose_name_plural = "server grants to users"


class ServerGroupObjectPermission(GroupObjectPermissionBase):
    """A permission on one server's tools, granted to a group."""

    content_object = models.ForeignKey("catalog.Server", on_delete=models.CASCADE, related_name="group_grants")
    granted_by = granted_by_field()

    class Meta(GroupObjectPermissionBase.Meta):
        verbose_name = "server grant to a group"
        verbose_name_plural = "server grants to groups"


class ToolUserObjectPermission(UserObjectPermissionBase):
    """A permission on one tool, granted to a user."""

    content_object = models.ForeignKey("catalog.Tool", on_delete=models.CASCADE, related_name="user_grants")
    granted_by = granted_by_field()

    class Meta(UserObjectPermissionBase.Meta):
        verbose_name = "tool grant to a user"
        verbose_name_plural = "tool grants to users"


class ToolGroupObjectPermission(GroupObjectPermissionBase):
    """A permission on one tool, granted to a group."""

    content_object = models.ForeignKey("catalog.Tool", on_delete=models.CASCADE, related_name="group_grants")
    granted_by = granted_by_field()

    class Meta(GroupObjectPermissionBase.Meta):
        verbose_name = "tool grant to a group"
        verbose_name_plural = "tool grants to groups"


# --- policy -------------------------------------------------------------------------------------


class PolicyVersion(models.Model):
    """A numbered version of the approval policy. Bumps when risk classes or a tool's classification change;
    recorded on every approval and audit event so a decision can be traced to the rules in force."""

    number = models.PositiveIntegerField(unique=True)
    reason = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-number"]
        get_latest_by = "number"

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        return f"policy-{self.number}"


class RiskClass(models.Model):
    """A risk tier (low, moderate, high, critical): whether calls need approval and how long one stays valid."""

    name = models.CharField(max_length=20, choices=RiskLevel.choices, unique=True)
    rank = models.PositiveSmallIntegerField(help_text="Ordering from least to most risky")
    description = models.CharField(max_length=300, blank=True)
    requires_approval = models.BooleanField(default=False, help_text="Every call to such a tool needs an approval")
    requires_approval_for_mutating = models.BooleanField(
        default=True, help_text="Calls to write/execute/approve tools of this class need an approval"
    )
    approval_ttl = models.DurationField(help_text="How long an approval stays usable after it is granted")

    class Meta:
        ordering = ["rank"]
        verbose_name_plural = "risk classes"

    def __str__(self) -> str:
        return self.get_name_display()


class Entitlement(models.Model):
    """A business entitlement (e.g. "payments-operator") a tool may require, held by users and groups.

    A tool that requires entitlements is visible only to principals holding all of them."""

    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="entitlements")
    groups = models.ManyToManyField(Group, blank=True, related_name="entitlements")

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class ToolPolicy(models.Model):
    """Governance fields of one tool plus its change-review state.

    Defaults come from the upstream annotations (untrusted hints, never less strict than the tool's own name and
    description: ``classification_note`` says when they were overruled) and are re-derived on every sync until
    an admin classifies the tool (``classified_by_admin``); from then on the admin's values win.
    ``held`` keeps the tool out of every visible set until a curator accepts its current definition.
    """

    tool = models.OneToOneField("catalog.Tool", on_delete=models.CASCADE, related_name="policy")
    operation_class = models.CharField(max_length=20, choices=OperationClass.choices, default=OperationClass.WRITE)
    reversibility = models.CharField(max_length=20, choices=Reversibility.choices, default=Reversibility.IRREVERSIBLE)
    risk_class = models.ForeignKey(RiskClass, on_delete=models.PROTECT, related_name="tool_policies")
    required_entitlements = models.ManyToManyField(Entitlement, blank=True, related_name="tool_policies")
    allowed_environments = models.JSONField(
        default=list, blank=True, help_text="Environments the tool may be used in; empty = its server's environment"
    )
    data_classes = models.JSONField(default=list, blank=True, help_text="e.g. pii, financial, secrets")
    classified_by_admin = models.BooleanField(default=False, help_text="An admin set the classification; syncs keep it")
    classified_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    classified_at = models.DateTimeField(null=True, blank=True)
    classification_note = models.CharField(
        max_length=300,
        blank=True,
        help_text="Why the defaults are stricter than the upstream hints (e.g. readOnlyHint on a tool that deletes)",
    )
    # Change review
    accepted_hash = models.CharField(max_length=64, blank=True, help_text="Definition hash last accepted")
    held = models.BooleanField(default=False, db_index=True, help_text="Out of search and execution until reviewed")
    hold_reason = models.CharField(max_length=300, blank=True)
    markers = models.JSONField(default=list, blank=True, help_text="Suspicious markers found in the definition")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "tool policies"

    def __str__(self) -> str:
        return f"policy of {self.tool_id}"

    @property
    def is_mutating(self) -> bool:
        return self.operation_class != OperationClass.READ

    @property
    def needs_approval(self) -> bool:
        """Whether every call waits for an approver: its risk class says so for all calls, or for mutating ones
        and the tool is mutating."""
        risk = self.risk_class
        return risk.requires_approval or (self.is_mutating and risk.requires_approval_for_mutating)


class ToolReview(models.Model):
    """A tool revision waiting for a curator: a changed definition of an accepted tool, or suspicious text."""

    tool = models.ForeignKey("catalog.Tool", on_delete=models.CASCADE, related_name="reviews")
    revision = models.ForeignKey(
        "catalog.ToolRevision", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    definition_hash = models.CharField(max_length=64, help_text="The definition under review")
    previous_hash = models.CharField(max_length=64, blank=True, help_text="The hash accepted before this change")
    kind = models.CharField(max_length=20, choices=ReviewKind.choices)
    status = models.CharField(max_length=20, choices=ReviewStatus.choices, default=ReviewStatus.PENDING)
    markers = models.JSONField(default=list, blank=True)
    # The fact behind a "near-copy of <tool>" marker, kept apart from the marker's words (which a curator reads and
    # which may be reworded): the original's own next change is no copy of this tool (governance.services.review).
    copy_of = models.ForeignKey(
        "catalog.Tool",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The other server's tool this one was held as a near-copy of",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"review of {self.tool} @ {self.definition_hash[:12]}"


class VisibilityVersion(models.Model):
    """A single row whose token changes with every write that can change who sees which tool (grants,
    groups, entitlements, users, tools, servers, policies, holds), in the writing transaction.

    Visible-set caches are keyed by it, so a change made by any process (web, worker, ``manage.py shell``,
    an import) is seen by every other process on its next request, whatever cache it has (LocMem included).
    A random token rather than a counter: one bumped in a transaction that rolled back is never reused."""

    token = models.CharField(max_length=32)

    def __str__(self) -> str:
        return self.token


# --- tenants and agents -------------------------------------------------------------------------


class Tenant(models.Model):
    """An organisation sharing this Scout with others. Isolation rule (``governance.selectors.tenant_q``): a
    server, approval or audit event with no tenant is shared; one with a tenant is seen only by callers acting
    in that tenant. A caller acts in the tenant of its token (a session: every tenant its user is a member of).
    An install without tenants is one shared space, exactly as before tenants existed."""

    slug = models.SlugField(max_length=50, unique=True)
    name = models.CharField(max_length=200)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="tenants",
        help_text="People who may act in this tenant (hold its tokens, see its servers, approvals and audit)",
    )
    # The tenant's own approval webhook, by environment variable name (as a server's credentials): the URL can
    # carry a token and the secret signs, so neither is ever stored.
    approval_webhook_url_env = models.CharField(
        max_length=100,
        blank=True,
        validators=[validate_env_var_name],
        help_text="Name of the environment variable holding the URL this tenant's approval requests are POSTed to "
        "(the URL is never stored), e.g. ACME_APPROVAL_WEBHOOK_URL. Empty: they go to the install-wide "
        "SCOUT_APPROVAL_WEBHOOK_URL, if set",
    )
    approval_webhook_secret_env = models.CharField(
        max_length=100,
        blank=True,
        validators=[validate_env_var_name],
        help_text="Name of the environment variable holding the secret that signs those calls (X-Scout-Signature; "
        "the secret is never stored), e.g. ACME_APPROVAL_WEBHOOK_SECRET. Empty: unsigned",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        if self.approval_webhook_secret_env and not self.approval_webhook_url_env:
            raise ValidationError({"approval_webhook_url_env": "A signing secret needs the webhook URL's variable."})


class ServerTenant(models.Model):
    """The tenant owning a server (catalog knows nothing of tenants: dependencies point catalog <- governance).
    A server without this row is shared by every tenant; with it, only that tenant's callers see its tools."""

    server = models.OneToOneField("catalog.Server", on_delete=models.CASCADE, primary_key=True, related_name="tenancy")
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="server_links")

    class Meta:
        verbose_name = "server tenant"

    def __str__(self) -> str:
        return f"{self.server_id} -> {self.tenant}"


class Agent(models.Model):
    """An agent acting for a user (Z8), optionally under another agent of the same user (a delegation chain).

    What it may do is its user's grants narrowed by its own ``AgentGrant`` rows, and by every agent above it:
    narrowing, never widening (a grant on a tool its human cannot see gives nothing). ``all_user_tools`` skips
    its own narrowing (agents carried over from the free-text agent names of older tokens have it, so they keep
    what they had). Chains deeper than ``SCOUT_DELEGATION_MAX_AGENTS`` agents are refused."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=200)
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="children",
        help_text="The agent that delegates to this one (same user); empty: the user delegates directly",
    )
    tenant = models.ForeignKey(
        Tenant,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="agents",
        help_text="The tenant it acts in (its tokens carry it); empty: shared servers only",
    )
    all_user_tools = models.BooleanField(
        default=False, help_text="Not narrowed by its own grants: may use whatever its user (and parent) may"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["user_id", "name"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="uniq_agent_name_per_user")]

    def __str__(self) -> str:
        return self.name

    def chain(self) -> list["Agent"]:
        """This agent and those above it, root first. Stops at a loop (never saved: ``clean`` refuses one)."""
        agents, seen, node = [], set(), self
        while node is not None and node.pk not in seen:
            seen.add(node.pk)
            agents.append(node)
            node = node.parent
        return agents[::-1]

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        from .constants import delegation_max_agents

        if self.parent_id is not None:
            if self.parent.user_id != self.user_id:
                raise ValidationError({"parent": "an agent can only delegate to another agent of the same user"})
            if self.parent.tenant_id != self.tenant_id:
                raise ValidationError({"tenant": "an agent acts in the tenant of the agent above it"})
            above = self.parent.chain()
            if self.pk is not None and any(agent.pk == self.pk for agent in above):
                raise ValidationError({"parent": "an agent cannot delegate to itself"})
            if len(above) + 1 > delegation_max_agents():
                raise ValidationError({"parent": f"delegation chains are limited to {delegation_max_agents()} agents"})
        if self.tenant_id is not None and self.user_id is not None:
            if not self.tenant.members.filter(pk=self.user_id).exists():
                raise ValidationError({"tenant": "the agent's user is not a member of this tenant"})


class AgentGrant(models.Model):
    """Narrows an agent to one server's or one tool's tools for one action (discover or execute).

    Never widens: the agent's user must hold the permission too, and every agent above must allow it."""

    ACTIONS = (("discover", "discover"), ("execute", "execute"))

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="grants")
    server = models.ForeignKey(
        "catalog.Server", null=True, blank=True, on_delete=models.CASCADE, related_name="agent_grants"
    )
    tool = models.ForeignKey(
        "catalog.Tool", null=True, blank=True, on_delete=models.CASCADE, related_name="agent_grants"
    )
    action = models.CharField(max_length=20, choices=ACTIONS)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(server__isnull=False, tool__isnull=True)
                | models.Q(server__isnull=True, tool__isnull=False),
                name="agent_grant_one_target",
            ),
            models.UniqueConstraint(
                fields=["agent", "server", "action"], condition=models.Q(tool__isnull=True), name="uniq_agent_server"
            ),
            models.UniqueConstraint(
                fields=["agent", "tool", "action"], condition=models.Q(server__isnull=True), name="uniq_agent_tool"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent}: {self.action} {self.server or self.tool}"


# --- identity -----------------------------------------------------------------------------------


class ApiToken(models.Model):
    """A bearer token for MCP clients, issued to a user (optionally for one agent and tenant).

    Only the SHA-256 of the raw token is stored; the raw value is shown once at creation."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=200)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    display_prefix = models.CharField(max_length=20, editable=False, help_text="First characters, to tell tokens apart")
    agent = models.ForeignKey(
        Agent,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="tokens",
        help_text="The agent this token is for (its grants narrow the user's); empty: the user in person",
    )
    tenant = models.ForeignKey(
        Tenant,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="tokens",
        help_text="The tenant the token acts in (the agent's, when it has one); empty: shared servers only",
    )
    scopes = models.JSONField(default=list, help_text='e.g. ["discover", "execute", "server:github"]')
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    minted_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="minted",
        help_text="The token that created this one (REST tokens/): revoking it revokes this one too",
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.display_prefix}…)"

    @property
    def ref(self) -> str:
        """A non-secret reference for logs and audit rows."""
        return f"tok-{self.pk}"


# --- approvals ----------------------------------------------------------------------------------


class ApprovalRequest(models.Model):
    """A request to call one tool with exact arguments, bound to the principal who asked.

    Usable once, by that principal, for those arguments, before ``expires_at``, while the tool's definition
    hash and the policy version are still the ones recorded here."""

    approval_id = models.CharField(max_length=40, unique=True, editable=False)
    requester = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    token = models.ForeignKey(ApiToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    token_ref = models.CharField(max_length=40, blank=True)
    agent = models.CharField(max_length=200, blank=True)
    tenant = models.ForeignKey(
        Tenant,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The requester's tenant: only approvers acting in it see the request; empty: shared",
    )
    delegation_chain = models.JSONField(default=list, blank=True)
    tool = models.ForeignKey("catalog.Tool", on_delete=models.CASCADE, related_name="approval_requests")
    tool_definition_hash = models.CharField(max_length=64)
    arguments_json = models.TextField(help_text="Canonical JSON of the exact arguments")
    arguments_digest = models.CharField(max_length=64, help_text="SHA-256 of arguments_json")
    policy_version = models.ForeignKey(PolicyVersion, on_delete=models.PROTECT, related_name="+")
    risk_class = models.CharField(max_length=20, choices=RiskLevel.choices)
    operation_class = models.CharField(max_length=20, choices=OperationClass.choices)
    status = models.CharField(max_length=20, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(help_text="Pending: decide before; approved: use before")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)
    consumed_at = models.DateTimeField(null=True, blank=True)
    trace_id = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "created_at"])]

    def __str__(self) -> str:
        return self.approval_id


# --- audit --------------------------------------------------------------------------------------


class AuditEventQuerySet(models.QuerySet["AuditEvent"]):
    def update(self, **kwargs):
        raise AuditLogImmutable("audit events cannot be updated")

    def delete(self):
        raise AuditLogImmutable("audit events cannot be deleted")


class AuditEvent(models.Model):
    """One governed action with the identity and delegation envelope of whoever did it. Append-only.

    Identity is copied as text (and kept as a constraint-free id) so deleting a user or a tool never
    rewrites the trail."""

    created_at = models.DateTimeField(db_index=True)
    event_type = models.CharField(max_length=40, choices=AuditEventType.choices)
    outcome = models.CharField(max_length=20, choices=AuditOutcome.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    human_subject = models.CharField(max_length=200, blank=True)
    token_ref = models.CharField(max_length=40, blank=True)
    agent = models.CharField(max_length=200, blank=True)
    tenant = models.CharField(max_length=200, blank=True)
    tenant_scope = models.ForeignKey(
        Tenant,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
        help_text="Whose audit views show this event: the caller's tenant, else the server's; empty: shared",
    )
    delegation_chain = models.JSONField(default=list, blank=True)
    target_server = models.CharField(max_length=200, blank=True)
    tool = models.ForeignKey(
        "catalog.Tool", null=True, blank=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    tool_ref = models.CharField(max_length=460, blank=True, help_text="server::name at the time")
    tool_definition_hash = models.CharField(max_length=64, blank=True)
    environment = models.CharField(max_length=50, blank=True)
    policy_version = models.PositiveIntegerField(null=True, blank=True)
    approval_ref = models.CharField(max_length=40, blank=True)
    trace_id = models.CharField(max_length=200, blank=True)
    payload = models.JSONField(default=dict, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["event_type", "created_at"]),
            models.Index(fields=["user", "created_at"]),
            models.Index(fields=["tool", "created_at"]),
            # A request's history on its page and each used request's call on the inbox (of the few events that
            # name an approval: 0.1 s a page at 300k events without it).
            models.Index(
                fields=["approval_ref"], name="governance_audit_approval", condition=~models.Q(approval_ref="")
            ),
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.event_type} {self.outcome} {self.human_subject}"

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            raise AuditLogImmutable("audit events cannot be updated")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AuditLogImmutable("audit events cannot be deleted")

    @property
    def envelope(self) -> dict:
        """The identity and delegation envelope as in seeds/001 (field names of the reference record)."""
        return {
            "humanSubject": self.human_subject,
            "agentId": self.agent,
            "tenantId": self.tenant,
            "delegationChain": list(self.delegation_chain),
            "targetServer": self.target_server,
            "tool": self.tool_ref,
            "environment": self.environment,
            "policyVersion": self.policy_version,
            "approvalId": self.approval_ref or None,
            "traceId": self.trace_id or None,
        }


class NotificationAttempt(models.Model):
    """One attempt to tell approvers of a request: an e-mail (to every approver at once) or a webhook call.

    Written by ``governance.services.notifications`` only, success or failure, so an operator sees in the admin
    whether approvers were reached. Holds no secret: the webhook's host only (a URL path can carry a token)."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    approval = models.ForeignKey(
        "governance.ApprovalRequest", null=True, on_delete=models.SET_NULL, related_name="notifications"
    )
    channel = models.CharField(max_length=10, choices=NotificationChannel.choices)
    outcome = models.CharField(max_length=10, choices=NotificationOutcome.choices)
    attempt = models.PositiveSmallIntegerField(default=1, help_text="1 for the first try, then each retry")
    target = models.CharField(max_length=300, help_text="E-mail recipients, or the webhook's host")
    status_code = models.PositiveSmallIntegerField(null=True, blank=True, help_text="The webhook's HTTP status")
    detail = models.CharField(max_length=300, blank=True, help_text="What went wrong (never a secret)")

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=["outcome", "-created_at"])]
        verbose_name = "notification to approvers"
        verbose_name_plural = "notifications to approvers"

    def __str__(self) -> str:
        return f"{self.get_channel_display()} {self.get_outcome_display().lower()} ({self.created_at:%Y-%m-%d %H:%M})"
