"""Catalog rows for search tests (factory_boy)."""

import factory
from django.utils import timezone

from catalog.choices import Transport
from catalog.constants import make_tool_id
from catalog.models import Server, Tool, ToolExample, ToolNegativeExample


class ServerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Server
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"server-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.replace("-", " ").title())
    transport = Transport.IMPORTED


class ToolFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tool

    server = factory.SubFactory(ServerFactory)
    name = factory.Sequence(lambda n: f"tool_{n}")
    tool_id = factory.LazyAttribute(lambda o: make_tool_id(o.server.slug, o.name))
    description = ""
    input_schema = factory.LazyFunction(lambda: {"type": "object", "properties": {}})
    definition_hash = factory.Sequence(lambda n: f"{n:064x}")
    first_seen_at = factory.LazyFunction(timezone.now)
    last_seen_at = factory.LazyFunction(timezone.now)


def add_examples(tool: Tool, *texts: str) -> None:
    for text in texts:
        ToolExample.objects.create(tool=tool, text=text)


def add_negatives(tool: Tool, *texts: str) -> None:
    for text in texts:
        ToolNegativeExample.objects.create(tool=tool, text=text)


def logged_search(user, *tools: Tool, query: str = "find the thing", called: Tool | None = None):
    """A search by ``user`` in the query log that returned ``tools`` (confidence high), followed by a call of
    ``called`` when given."""
    from governance.principals import principal_for_user
    from search.engine.ranking import Confidence
    from search.models import SearchOutcome
    from search.usage import LoggedResult, query_log_record

    entry = query_log_record(
        principal=principal_for_user(user),
        query=query,
        results=[LoggedResult(tool_id=tool.tool_id, score=0.5) for tool in tools],
        confidence=Confidence.HIGH,
        degraded=False,
        backend="embedded",
        latency_ms=5,
    )
    if called is not None:
        SearchOutcome.objects.create(entry=entry, tool=called, outcome="success")
    return entry


def teach(person, tool: Tool, request: str) -> None:
    """``person`` searched ``request`` and then called ``tool`` successfully, through the learning code the gateway
    uses (``search_outcome_record``): a learned request when they may execute the tool."""
    from governance.principals import principal_for_user
    from search.usage import search_outcome_record

    principal = principal_for_user(person)
    logged_search(person, tool, query=request)
    search_outcome_record(principal=principal, tool=tool, outcome="success")
