"""Tenants (Z12) and agents with their own grants (Z8).

Tokens and approvals named their agent and tenant in free text, which filtered nothing. Each distinct tenant
text becomes a Tenant (the token's user joins it) and each (user, agent text) an Agent that acts in it with
``all_user_tools`` (not narrowed), so every existing token sees exactly what it saw before: no server has a
tenant yet, and a server without one is shared. Audit events keep their text (append-only); their new
``tenant_scope`` starts empty (shared)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.utils.text import slugify


def _tenant(Tenant, label: str, cache: dict):
    label = label.strip()
    if not label:
        return None
    if label not in cache:
        base = slugify(label)[:40] or "tenant"
        slug, n = base, 1
        while Tenant.objects.filter(slug=slug).exclude(name=label).exists():
            n += 1
            slug = f"{base}-{n}"
        cache[label], _ = Tenant.objects.get_or_create(slug=slug, defaults={"name": label[:200]})
    return cache[label]


def forwards(apps, schema_editor):
    Tenant = apps.get_model("governance", "Tenant")
    Agent = apps.get_model("governance", "Agent")
    ApiToken = apps.get_model("governance", "ApiToken")
    ApprovalRequest = apps.get_model("governance", "ApprovalRequest")
    tenants: dict = {}
    for token in ApiToken.objects.exclude(agent_label="", tenant_label=""):
        tenant = _tenant(Tenant, token.tenant_label, tenants)
        if tenant is not None:
            tenant.members.add(token.user_id)
        agent = None
        if token.agent_label.strip():
            agent, _ = Agent.objects.get_or_create(
                user_id=token.user_id,
                name=token.agent_label.strip()[:200],
                defaults={"tenant": tenant, "all_user_tools": True},
            )
            tenant = agent.tenant  # one agent, one tenant: the first token's
        ApiToken.objects.filter(pk=token.pk).update(agent=agent, tenant=tenant)
    for request in ApprovalRequest.objects.exclude(tenant_label=""):
        tenant = _tenant(Tenant, request.tenant_label, tenants)
        ApprovalRequest.objects.filter(pk=request.pk).update(tenant=tenant)


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0004_progress"),
        ("governance", "0010_notification_attempts"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Tenant",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("slug", models.SlugField(unique=True)),
                ("name", models.CharField(max_length=200)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "members",
                    models.ManyToManyField(
                        blank=True,
                        help_text="People who may act in this tenant (hold its tokens, see its servers, approvals and audit)",
                        related_name="tenants",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"ordering": ["slug"]},
        ),
        migrations.CreateModel(
            name="ServerTenant",
            fields=[
                (
                    "server",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="tenancy",
                        serialize=False,
                        to="catalog.server",
                    ),
                ),
                (
                    "tenant",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="server_links", to="governance.tenant"
                    ),
                ),
            ],
            options={"verbose_name": "server tenant"},
        ),
        migrations.CreateModel(
            name="Agent",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=200)),
                (
                    "all_user_tools",
                    models.BooleanField(
                        default=False,
                        help_text="Not narrowed by its own grants: may use whatever its user (and parent) may",
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "parent",
                    models.ForeignKey(
                        blank=True,
                        help_text="The agent that delegates to this one (same user); empty: the user delegates directly",
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="children",
                        to="governance.agent",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="agents", to=settings.AUTH_USER_MODEL
                    ),
                ),
                (
                    "tenant",
                    models.ForeignKey(
                        blank=True,
                        help_text="The tenant it acts in (its tokens carry it); empty: shared servers only",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="agents",
                        to="governance.tenant",
                    ),
                ),
            ],
            options={
                "ordering": ["user_id", "name"],
                "constraints": [models.UniqueConstraint(fields=("user", "name"), name="uniq_agent_name_per_user")],
            },
        ),
        migrations.CreateModel(
            name="AgentGrant",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("action", models.CharField(choices=[("discover", "discover"), ("execute", "execute")], max_length=20)),
                (
                    "agent",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="grants", to="governance.agent"
                    ),
                ),
                (
                    "server",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="agent_grants",
                        to="catalog.server",
                    ),
                ),
                (
                    "tool",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="agent_grants",
                        to="catalog.tool",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("server__isnull", False), ("tool__isnull", True)),
                            models.Q(("server__isnull", True), ("tool__isnull", False)),
                            _connector="OR",
                        ),
                        name="agent_grant_one_target",
                    ),
                    models.UniqueConstraint(
                        condition=models.Q(("tool__isnull", True)),
                        fields=("agent", "server", "action"),
                        name="uniq_agent_server",
                    ),
                    models.UniqueConstraint(
                        condition=models.Q(("server__isnull", True)),
                        fields=("agent", "tool", "action"),
                        name="uniq_agent_tool",
                    ),
                ],
            },
        ),
        migrations.AddField(
            model_name="auditevent",
            name="tenant_scope",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                help_text="Whose audit views show this event: the caller's tenant, else the server's; empty: shared",
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="governance.tenant",
            ),
        ),
        # Free-text agent and tenant -> rows (data step), then the foreign keys take the old names.
        migrations.RenameField(model_name="apitoken", old_name="agent", new_name="agent_label"),
        migrations.RenameField(model_name="apitoken", old_name="tenant", new_name="tenant_label"),
        migrations.RenameField(model_name="approvalrequest", old_name="tenant", new_name="tenant_label"),
        migrations.AddField(
            model_name="apitoken",
            name="agent",
            field=models.ForeignKey(
                blank=True,
                help_text="The agent this token is for (its grants narrow the user's); empty: the user in person",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="tokens",
                to="governance.agent",
            ),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="tenant",
            field=models.ForeignKey(
                blank=True,
                help_text="The tenant the token acts in (the agent's, when it has one); empty: shared servers only",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="tokens",
                to="governance.tenant",
            ),
        ),
        migrations.AddField(
            model_name="approvalrequest",
            name="tenant",
            field=models.ForeignKey(
                blank=True,
                help_text="The requester's tenant: only approvers acting in it see the request; empty: shared",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="governance.tenant",
            ),
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop),
        migrations.RemoveField(model_name="apitoken", name="agent_label"),
        migrations.RemoveField(model_name="apitoken", name="tenant_label"),
        migrations.RemoveField(model_name="approvalrequest", name="tenant_label"),
    ]
