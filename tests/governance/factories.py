"""Factories for governance tests (factory_boy), with the catalog rows they need."""

from datetime import timedelta

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone

from catalog.choices import Transport
from catalog.constants import make_tool_id
from catalog.definitions import definition_hash
from catalog.models import Server, Tool
from governance.models import Agent, Entitlement, Tenant


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    is_active = True


class GroupFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Group
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"group-{n}")


class ServerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Server
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"gov-server-{n}")
    name = factory.LazyAttribute(lambda o: o.slug)
    transport = Transport.IMPORTED
    environment = "production"


def _hash_of(o) -> str:
    return definition_hash(
        {
            "name": o.name,
            "title": "",
            "description": o.description,
            "inputSchema": o.input_schema,
            "outputSchema": None,
            "annotations": o.annotations,
        }
    )


class ToolFactory(factory.django.DjangoModelFactory):
    """A tool created outside a sync: governance's post_save receiver gives it a policy from its
    annotations (read-only by default here, so tests opt in to mutating tools)."""

    class Meta:
        model = Tool

    server = factory.SubFactory(ServerFactory)
    name = factory.Sequence(lambda n: f"tool_{n}")
    tool_id = factory.LazyAttribute(lambda o: make_tool_id(o.server.slug, o.name))
    description = "Lists things."
    input_schema = factory.LazyFunction(lambda: {"type": "object", "properties": {"q": {"type": "string"}}})
    annotations = factory.LazyFunction(lambda: {"readOnlyHint": True})
    definition_hash = factory.LazyAttribute(_hash_of)
    first_seen_at = factory.LazyFunction(timezone.now)
    last_seen_at = factory.LazyFunction(timezone.now)


class EntitlementFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Entitlement

    slug = factory.Sequence(lambda n: f"entitlement-{n}")
    name = factory.LazyAttribute(lambda o: o.slug)


def in_days(days: float):
    return timezone.now() + timedelta(days=days)


def staff_in_role(username: str, role: str):
    """A staff member in the preset role group ``role`` (governance.roles), in no tenant."""
    user = UserFactory(username=username, is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    return user


def tenant_with(slug: str, *members) -> Tenant:
    """A tenant (created once per slug) with ``members`` added."""
    tenant, _ = Tenant.objects.get_or_create(slug=slug, defaults={"name": slug.title()})
    tenant.members.add(*members)
    return tenant


def agent_of(user, name: str, *, tenant=None, parent=None, all_user_tools: bool = False) -> Agent:
    """An agent of ``user`` (validated as the admin would: same user, same tenant, depth limit)."""
    agent = Agent(user=user, name=name, tenant=tenant, parent=parent, all_user_tools=all_user_tools)
    agent.full_clean()
    agent.save()
    return agent


def tenant_token(user, slug: str):
    """A real API token for ``user`` acting in tenant ``slug`` (created if needed, ``user`` a member) through agent
    "<slug>-triage" (not narrowed), verified into a principal: (token, raw, principal)."""
    from governance.services.tokens import api_token_create, api_token_verify

    tenant = tenant_with(slug, user)
    token, raw = api_token_create(
        user=user,
        name=f"{slug} token",
        agent=agent_of(user, f"{slug}-triage", tenant=tenant, all_user_tools=True),
        scopes=["discover", "execute"],
        expires_at=in_days(30),
    )
    principal = api_token_verify(raw)
    assert principal is not None and principal.tenant == slug
    return token, raw, principal
