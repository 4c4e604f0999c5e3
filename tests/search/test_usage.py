"""The usage loop's services: query log modes and retention, search → execution links, learned requests."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from governance.principals import principal_for_user
from governance.services.permissions import permission_grant
from search.choices import LearnedStatus
from search.documents import learned_weight
from search.engine.ranking import Confidence
from search.models import LearnedRequest, QueryLogEntry, SearchOutcome
from search.usage import (
    LoggedResult,
    learned_request_promote,
    learned_request_reject,
    query_log_purge,
    query_log_record,
    query_redact,
    search_outcome_record,
)
from tests.celery_results import task_result
from tests.governance.factories import ServerFactory, ToolFactory

pytestmark = pytest.mark.django_db
QUERY = "email alice@example.com the invoice 12345 with key sk_live_4eC39HqLyjWDarjtT1zdp7dc"


@pytest.fixture
def world(member, outsider, superuser, settings):
    settings.SCOUT_LEARNED_INDEX_INTERVAL = -1  # flush inline, not on a timer
    server = ServerFactory(slug="mail")
    send = ToolFactory(server=server, name="send_email", description="Send an e-mail message.")
    other = ToolFactory(server=server, name="archive_email", description="Archive an e-mail message.")
    for action in ("discover", "execute"):
        permission_grant(actor=superuser, target=server, action=action, holder=member)
    return {"send": send, "other": other, "member": principal_for_user(member), "outsider": outsider}


def _log(principal, query=QUERY, tools=("mail::send_email",), confidence=Confidence.HIGH):
    return query_log_record(
        principal=principal,
        query=query,
        results=[LoggedResult(tool_id=tool_id, score=0.9) for tool_id in tools],
        confidence=confidence,
        degraded=False,
        backend="embedded",
        latency_ms=12.3,
    )


def test_full_mode_stores_the_request_and_what_came_back(world):
    entry = _log(world["member"])
    stored = QueryLogEntry.objects.get(pk=entry.pk)
    assert stored.query == QUERY and stored.log_mode == "full"
    assert stored.results == [{"tool_id": "mail::send_email", "score": 0.9}]
    assert stored.confidence == "high" and stored.backend == "embedded" and stored.latency_ms == 12.3
    assert stored.user == world["member"].user


def test_redacted_mode_masks_digits_emails_and_tokens(world, settings):
    settings.SCOUT_QUERY_LOG = "redacted"
    stored = QueryLogEntry.objects.get(pk=_log(world["member"]).pk).query
    assert stored == "email <email> the invoice ##### with key <token>"
    for secret in ("alice", "example.com", "12345", "sk_live", "4eC39"):
        assert secret not in stored
    assert query_redact("list files in room 4") == "list files in room #"


@pytest.mark.parametrize(
    "secret",
    [
        "sk-proj-AbCdEfGhIjKlMnOpQrStUv",  # a key without digits
        "AKIAIOSFODNNSECRETKEYZZ",  # upper case only
        "aGVsbG8gd29ybGQ/Zm9vYmFy+YmF6cXV4aGVsbG8=",  # base64: "/", "+" and "=" split it into short pieces
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlX2hlcmU",  # a JWT: dots between its parts
        "john.doe\uff20example.com",  # a full-width at sign
    ],
)
def test_redacted_mode_masks_tokens_without_digits_or_split_by_punctuation(world, settings, secret):
    settings.SCOUT_QUERY_LOG = "redacted"
    stored = QueryLogEntry.objects.get(pk=_log(world["member"], query=f"call the api with {secret} please").pk).query
    assert stored.startswith("call the api with <") and stored.endswith("> please"), stored
    pieces = [piece for piece in re.split(r"[^A-Za-z0-9]+", secret.replace("\uff20", "@")) if len(piece) > 3]
    assert [piece for piece in pieces if piece in stored] == []


@pytest.mark.parametrize("address", ["alice.jones@localhost", "bob.smith@intranet", '"bob smith"@example.com'])
def test_redacted_mode_masks_addresses_on_a_one_label_host_or_with_a_quoted_name(world, settings, address):
    """The redacted mode says it masks e-mail addresses; one whose host has no dot, or whose name is quoted,
    was stored as written."""
    settings.SCOUT_QUERY_LOG = "redacted"
    stored = QueryLogEntry.objects.get(pk=_log(world["member"], query=f"mail {address} the report").pk).query
    assert stored == "mail <email> the report"


def test_redacted_mode_keeps_ordinary_words():
    for text in (
        "internationalization settings for the read-only-database-connection",
        "Kubernetes-Deployment-Rollback of listPullRequests in GitHub",
    ):
        assert query_redact(text) == text
    assert query_redact("room \u2463 on floor \u00b2") == "room # on floor #"  # numerals of other scripts


def test_off_mode_stores_nothing(world, settings):
    settings.SCOUT_QUERY_LOG = "off"
    assert _log(world["member"]) is None
    assert not QueryLogEntry.objects.exists()
    assert search_outcome_record(principal=world["member"], tool=world["send"], outcome="success") is None
    assert not LearnedRequest.objects.exists()


def test_purge_removes_only_rows_past_retention(world, settings):
    settings.SCOUT_QUERY_LOG_RETENTION_DAYS = 7
    old, recent = _log(world["member"]), _log(world["member"])
    QueryLogEntry.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=8))
    assert query_log_purge() == 1
    assert list(QueryLogEntry.objects.values_list("pk", flat=True)) == [recent.pk]


def test_learned_requests_words_are_kept_no_longer_than_the_log_keeps_them(world, settings, superuser):
    """A learned request's text is a user's request copied from the log: it outlived the log's retention. Past it
    (from its last confirmation) a learned request is gone, from the index too; a rejected one keeps only its key
    (still refused); a promoted one is the curator's example and stays."""
    from search.models import ToolEmbedding

    settings.SCOUT_QUERY_LOG_RETENTION_DAYS = 7
    words = {
        "old": "mail the Quarterwhistle contract to our lawyer",
        "rejected": "mail the Farthingale settlement to the bank",
        "promoted": "mail the signed lease to the landlord",
        "recent": "mail the Pemberton invoice to accounting",
    }
    learned = {}
    for name, text in words.items():
        _log(world["member"], query=text)
        search_outcome_record(principal=world["member"], tool=world["send"], outcome="success")
        learned[name] = LearnedRequest.objects.get(text=text)
    learned_request_reject(learned=learned["rejected"], actor=superuser)
    learned_request_promote(learned=learned["promoted"], actor=superuser)
    stale = [learned[name].pk for name in ("old", "rejected", "promoted")]
    LearnedRequest.objects.filter(pk__in=stale).update(last_seen=timezone.now() - timedelta(days=8))

    query_log_purge()
    kept = {row.pk: row for row in LearnedRequest.objects.all()}
    assert learned["old"].pk not in kept
    assert kept[learned["rejected"].pk].text == "" and kept[learned["rejected"].pk].status == LearnedStatus.REJECTED
    assert kept[learned["promoted"].pk].text == words["promoted"]
    assert kept[learned["recent"].pk].text == words["recent"]
    stored = repr(list(ToolEmbedding.objects.values_list("texts", flat=True)))
    assert "Quarterwhistle" not in stored and "Farthingale" not in stored and "Pemberton" in stored

    _log(world["member"], query=words["rejected"])  # asked again: still refused by its key
    search_outcome_record(principal=world["member"], tool=world["send"], outcome="success")
    assert LearnedRequest.objects.get(pk=learned["rejected"].pk).status == LearnedStatus.REJECTED
    assert not LearnedRequest.objects.filter(text=words["rejected"]).exists()


def test_an_execution_links_to_the_search_that_returned_the_tool_within_the_window(world, settings):
    settings.SCOUT_QUERY_LINK_WINDOW_SECONDS = 600
    entry = _log(world["member"])
    unrelated = search_outcome_record(principal=world["member"], tool=world["other"], outcome="success")
    assert unrelated is None  # that search did not return archive_email
    linked = search_outcome_record(principal=world["member"], tool=world["send"], outcome="validation_error")
    assert linked is not None and linked.entry == entry and linked.outcome == "validation_error"
    QueryLogEntry.objects.filter(pk=entry.pk).update(created_at=timezone.now() - timedelta(seconds=601))
    assert search_outcome_record(principal=world["member"], tool=world["send"], outcome="success") is None
    assert SearchOutcome.objects.count() == 1


def test_an_execution_links_to_the_search_that_offered_the_tool_highest_then_the_newest(world):
    asked = _log(world["member"], query="send the invoice to Alice", tools=("mail::send_email", "mail::archive_email"))
    _log(world["member"], query="archive last week's mail", tools=("mail::archive_email", "mail::send_email"))
    linked = search_outcome_record(principal=world["member"], tool=world["send"], outcome="success")
    # The newer search offered send_email second, under another request: the call is the first search's.
    assert linked.entry == asked
    assert [learned.text for learned in LearnedRequest.objects.filter(tool=world["send"])] == [
        "send the invoice to Alice"
    ]
    newest = _log(world["member"], query="mail Bob the report", tools=("mail::send_email",))
    assert search_outcome_record(principal=world["member"], tool=world["send"], outcome="denied").entry == newest


def test_another_principals_search_is_never_linked(world, outsider):
    _log(world["member"])
    assert search_outcome_record(principal=principal_for_user(outsider), tool=world["send"], outcome="success") is None


@pytest.mark.parametrize("outcome", ["upstream_error", "validation_error", "denied", "pending_approval"])
def test_only_a_success_teaches(world, outcome):
    _log(world["member"])
    assert search_outcome_record(principal=world["member"], tool=world["send"], outcome=outcome).outcome == outcome
    assert not LearnedRequest.objects.exists()


def test_a_success_learns_the_request_once_per_principal(world):
    for _ in range(5):
        _log(world["member"], query="send the quarterly numbers to finance")
        search_outcome_record(principal=world["member"], tool=world["send"], outcome="success")
    learned = LearnedRequest.objects.get()
    assert learned.tool == world["send"] and learned.text == "send the quarterly numbers to finance"
    assert learned.confirmations == 5 and learned.principal_count == 1  # repeats add no weight
    assert learned_weight(learned.principal_count) == learned_weight(1)


def test_weight_grows_with_distinct_principals_and_is_capped(settings):
    settings.SCOUT_LEARNED_WEIGHT_BASE, settings.SCOUT_LEARNED_WEIGHT_STEP = 0.6, 0.1
    settings.SCOUT_LEARNED_WEIGHT_CAP = 0.9
    weights = [learned_weight(n) for n in range(0, 10)]
    assert weights[0] == 0.0 and weights[1] == 0.6
    assert weights[2] > weights[1] and max(weights) == 0.9 and weights[-1] == 0.9
    assert weights == sorted(weights)


def test_nothing_is_learned_for_a_tool_the_principal_cannot_execute(world, superuser):
    from django.contrib.auth import get_user_model

    viewer = get_user_model().objects.create_user(username="viewer")
    permission_grant(actor=superuser, target=world["send"].server, action="discover", holder=viewer)
    principal = principal_for_user(viewer)
    _log(principal)
    search_outcome_record(principal=principal, tool=world["send"], outcome="success")
    assert not LearnedRequest.objects.exists()


def test_a_rejected_request_is_never_learned_again(world, superuser):
    _log(world["member"], query="mail the report")
    search_outcome_record(principal=world["member"], tool=world["send"], outcome="success")
    learned_request_reject(learned=LearnedRequest.objects.get(), actor=superuser)
    _log(world["member"], query="mail  the report")  # same request, other spacing
    search_outcome_record(principal=world["member"], tool=world["send"], outcome="success")
    learned = LearnedRequest.objects.get()
    assert learned.status == LearnedStatus.REJECTED and learned.confirmations == 1


def test_promote_makes_it_a_curated_example_request(world, superuser):
    _log(world["member"], query="mail the report to my boss")
    search_outcome_record(principal=world["member"], tool=world["send"], outcome="success")
    learned = learned_request_promote(learned=LearnedRequest.objects.get(), actor=superuser)
    assert learned.status == LearnedStatus.PROMOTED and learned.decided_by == superuser
    assert list(world["send"].examples.values_list("text", flat=True)) == ["mail the report to my boss"]


def test_learning_stays_inside_one_tenants_space(world, member, superuser):
    """Z12: a tenant's words never become part of a shared tool (every tenant would be ranked by them); they
    teach that tenant's own tools only."""
    from governance.models import ServerTenant
    from governance.services.tokens import api_token_create, api_token_verify
    from tests.governance.factories import in_days, tenant_with

    acme = tenant_with("acme", member)
    _, raw = api_token_create(user=member, name="t", tenant=acme, scopes=["discover", "execute"], expires_at=in_days(1))
    in_acme = api_token_verify(raw)
    _log(in_acme, query="send the quarterly numbers to finance")
    search_outcome_record(principal=in_acme, tool=world["send"], outcome="success")  # a shared tool
    assert not LearnedRequest.objects.exists()
    ServerTenant.objects.create(server=world["send"].server, tenant=acme)  # now acme's own
    search_outcome_record(principal=in_acme, tool=world["send"], outcome="success")
    assert LearnedRequest.objects.get().text == "send the quarterly numbers to finance"


def test_a_server_given_to_another_tenant_or_shared_forgets_what_its_tools_learned(
    world, member, superuser, client, django_user_model, django_capture_on_commit_callbacks
):
    """Z12: learned requests are the words of the callers of the server's tenant, but they stayed on its tools when
    a superuser moved the server to another tenant (or shared it): that tenant's curators read them (Search ->
    Learned requests) and its callers were ranked by them. Changing a server's tenant now forgets them (a promoted
    one stays a curated example) and reindexes its tools."""
    from django.contrib.auth.models import Group
    from django.urls import reverse

    from governance.models import ServerTenant
    from governance.roles import CURATORS
    from governance.services.tokens import api_token_create, api_token_verify
    from search.models import IndexGeneration
    from tests.governance.factories import in_days, tenant_with

    acme, globex = tenant_with("acme", member), tenant_with("globex")
    server = world["send"].server
    tenancy = ServerTenant.objects.create(server=server, tenant=acme)
    _, raw = api_token_create(user=member, name="t", tenant=acme, scopes=["discover", "execute"], expires_at=in_days(1))
    in_acme = api_token_verify(raw)
    for query in ("send the globex takeover terms to finance", "mail the layoff list to hr"):
        _log(in_acme, query=query)
        search_outcome_record(principal=in_acme, tool=world["send"], outcome="success")
    assert LearnedRequest.objects.count() == 2
    curator = django_user_model.objects.create_user(username="globex-curator", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    globex.members.add(curator)
    client.force_login(curator)
    learned_page = reverse("admin:search_learnedrequest_changelist")

    generations = IndexGeneration.objects.count()
    with django_capture_on_commit_callbacks(execute=True):
        tenancy.tenant = globex
        tenancy.save()  # as the server's admin page saves its tenant section
    assert not LearnedRequest.objects.exists()
    assert IndexGeneration.objects.count() > generations  # its tools reindexed without them
    html = client.get(learned_page).content.decode()
    assert "takeover" not in html and "layoff" not in html

    # Shared (the tenant section removed): what it learned in globex is forgotten too; other servers keep theirs.
    tenancy.tenant = acme
    tenancy.save()
    _log(in_acme, query="mail the layoff list to hr")
    search_outcome_record(principal=in_acme, tool=world["send"], outcome="success")
    kept = ToolFactory(server=ServerFactory(slug="kept"), name="keep")
    LearnedRequest.objects.create(tool=kept, text="kept words", key="k")
    tenancy.delete()
    assert list(LearnedRequest.objects.values_list("text", flat=True)) == ["kept words"]
    # A shared server given to a tenant forgets the shared callers' words; saved again unchanged, nothing.
    tenancy = ServerTenant.objects.create(server=kept.server, tenant=acme)
    assert not LearnedRequest.objects.exists()
    LearnedRequest.objects.create(tool=kept, text="acme words", key="a")
    tenancy.save()
    assert list(LearnedRequest.objects.values_list("text", flat=True)) == ["acme words"]


def test_curators_read_only_shared_and_their_tenants_requests(world, member, outsider, django_user_model):
    """Z12: the query log, the workbench built on it, keep each tenant's words to that tenant."""
    from governance.services.tokens import api_token_create, api_token_verify
    from search.usage import query_log_visible_to
    from search.workbench import workbench_groups
    from tests.governance.factories import in_days, tenant_with

    acme, globex = tenant_with("acme", member), tenant_with("globex", outsider)

    def principal(user, tenant):
        _, raw = api_token_create(user=user, name="t", tenant=tenant, scopes=["discover"], expires_at=in_days(1))
        return api_token_verify(raw)

    _log(principal(member, acme), query="acme payroll run", confidence=Confidence.NONE)
    _log(principal(outsider, globex), query="globex merger plans", confidence=Confidence.NONE)
    _log(world["member"], query="shared status page", confidence=Confidence.NONE)
    curator = django_user_model.objects.create_user(username="curator-acme", is_staff=True)
    acme.members.add(curator)
    assert set(query_log_visible_to(user=curator).values_list("query", flat=True)) == {
        "acme payroll run",
        "shared status page",
    }
    assert {group.text for group in workbench_groups(user=curator)} == {"acme payroll run", "shared status page"}
    assert len(workbench_groups()) == 3  # the whole install, for a caller that names nobody


def test_learned_reindexes_are_batched_into_one_per_interval(
    world, superuser, settings, monkeypatch, django_capture_on_commit_callbacks
):
    """Several new learned requests within the interval arm one timer, whose one flush reindexes every
    changed tool in one generation (without a broker; with one the flush is queued with a countdown, see
    test_learned_flush_worker.py)."""
    from governance.services.permissions import permission_grant as grant
    from search import usage
    from search.models import IndexGeneration

    settings.SCOUT_LEARNED_INDEX_INTERVAL = 30
    armed = []

    class FakeTimer:  # the interval elapses when the test says so
        def __init__(self, interval, function):
            armed.append((interval, function))
            self.daemon = False

        def start(self):
            pass

    monkeypatch.setattr(usage.threading, "Timer", FakeTimer)
    other = principal_for_user(world["outsider"])
    for action in ("discover", "execute"):
        grant(actor=superuser, target=world["send"].server, action=action, holder=world["outsider"])
    with django_capture_on_commit_callbacks(execute=True):
        for principal, tool, query in (
            (world["member"], world["send"], "mail the invoice to finance"),
            (other, world["send"], "mail the invoice to finance"),
            (world["member"], world["other"], "put the old newsletters away"),
        ):
            _log(principal, query=query, tools=(tool.tool_id,))
            search_outcome_record(principal=principal, tool=tool, outcome="success")
    assert [interval for interval, _ in armed] == [30]  # one flush on its way for all three changes
    assert LearnedRequest.objects.filter(indexed=False).count() == 2
    generations = IndexGeneration.objects.count()
    assert armed[0][1] is usage._flush_from_timer  # in its own thread, which then closes its connections
    usage._flush_queue()  # the interval has passed (here in the test's thread: its connection stays open)
    assert IndexGeneration.objects.count() == generations + 1
    assert not LearnedRequest.objects.filter(indexed=False).exists()
    with django_capture_on_commit_callbacks(execute=True):
        _log(other, query="put the old newsletters away", tools=("mail::archive_email",))
        search_outcome_record(principal=other, tool=world["other"], outcome="success")
    assert len(armed) == 2  # after a flush, the next change arms the next one


def test_the_beat_flushes_only_learned_requests_that_waited_past_the_interval(world, settings):
    """The safety net for a lost batched flush (search.tasks.flush_stale_learned_index, on the beat): rows
    waiting less than SCOUT_LEARNED_INDEX_INTERVAL are left to their batched flush; older ones are flushed."""
    from search.models import IndexGeneration
    from search.tasks import flush_stale_learned_index

    settings.SCOUT_LEARNED_INDEX_INTERVAL = 60
    _log(world["member"], query="mail the invoice to finance")
    search_outcome_record(principal=world["member"], tool=world["send"], outcome="success")  # not flushed: no commit
    learned = LearnedRequest.objects.get()
    assert not learned.indexed and learned.pending_since is not None
    generations = IndexGeneration.objects.count()

    assert task_result(flush_stale_learned_index.delay()) == 0  # its batched flush is still on its way
    assert IndexGeneration.objects.count() == generations

    LearnedRequest.objects.filter(pk=learned.pk).update(pending_since=timezone.now() - timedelta(seconds=61))
    assert task_result(flush_stale_learned_index.delay()) == 1  # that flush was lost: the beat does it
    assert IndexGeneration.objects.count() == generations + 1
    learned.refresh_from_db()
    assert learned.indexed and learned.pending_since is None


def test_the_beat_schedules_the_safety_net_every_interval(settings):
    from scoutsite import celery_app
    from scoutsite.celery import setup_periodic_tasks

    # The schedule as the beat builds it at start (on_after_finalize), from the interval set now: the app may
    # have been finalized earlier in this process under another test's settings.
    name = "search: flush waiting learned requests"
    settings.SCOUT_LEARNED_INDEX_INTERVAL = 45
    setup_periodic_tasks(celery_app)
    entry = celery_app.conf.beat_schedule[name]
    assert entry["task"] == "search.tasks.flush_stale_learned_index"
    assert entry["schedule"] == 45.0


def test_a_learned_request_changed_during_a_flush_waits_for_the_next_one(world, superuser, monkeypatch):
    """A new principal confirms a request while the flush's reindex runs: the reindex may have read the old
    weight, so that row stays waiting (the flush its change armed takes it) instead of being marked indexed."""
    from governance.services.permissions import permission_grant as grant
    from search import services, usage

    for action in ("discover", "execute"):
        grant(actor=superuser, target=world["send"].server, action=action, holder=world["outsider"])
    other = principal_for_user(world["outsider"])
    _log(world["member"], query="mail the invoice to finance")
    search_outcome_record(principal=world["member"], tool=world["send"], outcome="success")
    real_update = services.index_update

    def update_while_another_principal_confirms(*, tool_pks):
        generation = real_update(tool_pks=tool_pks)
        _log(other, query="mail the invoice to finance")
        search_outcome_record(principal=other, tool=world["send"], outcome="success")  # after the vectors were read
        return generation

    monkeypatch.setattr(services, "index_update", update_while_another_principal_confirms)
    assert usage.learned_index_flush() == 1
    learned = LearnedRequest.objects.get()
    assert learned.principal_count == 2
    assert not learned.indexed and learned.pending_since is not None  # its new weight is not in the index yet
    monkeypatch.setattr(services, "index_update", real_update)
    assert usage.learned_index_flush() == 1
    assert LearnedRequest.objects.get().indexed


def test_one_person_with_many_tokens_and_agents_teaches_as_one(world, member):
    """Poisoning: anyone may mint their own tokens (POST /api/v1/tokens/) and each token, or agent, was a distinct
    principal, so one person alone lifted a learned request to the weight the cap reserves for many people."""
    from governance.services.tokens import api_token_create, api_token_verify
    from tests.governance.factories import agent_of, in_days

    tokens = [
        api_token_create(user=member, name=f"t{i}", scopes=["discover", "execute"], expires_at=in_days(1), agent=agent)[
            1
        ]
        for i, agent in enumerate(
            [
                None,
                None,
                agent_of(member, "planner", all_user_tools=True),
                agent_of(member, "writer", all_user_tools=True),
            ]
        )
    ]
    for raw in tokens:
        principal = api_token_verify(raw)
        _log(principal, query="send the quarterly numbers to finance")
        assert search_outcome_record(principal=principal, tool=world["send"], outcome="success") is not None
    learned = LearnedRequest.objects.get()
    assert learned.confirmations == 4 and learned.principal_count == 1
    assert learned_weight(learned.principal_count) == learned_weight(1)


def test_an_agent_with_the_longest_name_has_its_searches_logged_and_linked(world, member):
    """An agent's name may be 200 characters; the log's key named it and overflowed its 200-character column, which
    Postgres refuses (SQLite stores it): that agent's searches were never logged, its calls never linked."""
    from governance.services.tokens import api_token_create, api_token_verify
    from tests.governance.factories import agent_of, in_days

    agent = agent_of(member, "n" * 200, all_user_tools=True)
    _, raw = api_token_create(
        user=member, name="long", scopes=["discover", "execute"], expires_at=in_days(1), agent=agent
    )
    principal = api_token_verify(raw)
    entry = _log(principal)
    assert len(entry.principal_key) <= QueryLogEntry._meta.get_field("principal_key").max_length
    assert search_outcome_record(principal=principal, tool=world["send"], outcome="success").entry == entry
    assert search_outcome_record(principal=world["member"], tool=world["send"], outcome="success") is None


def test_one_person_teaches_a_tool_a_bounded_number_of_requests(world, settings, outsider, superuser):
    """Flooding: each successful call after a search in new words made a learned request, so one person with one
    tool (discover + execute) made rows and index vectors without end, every one embedded again at each reindex of
    the tool. A person teaches a tool SCOUT_LEARNED_PER_TEACHER requests; past that they still confirm others'."""
    from search.selectors import tool_docs_load

    settings.SCOUT_LEARNED_PER_TEACHER = 3
    for i in range(8):
        _log(world["member"], query=f"send the report number {i} to finance")
        search_outcome_record(principal=world["member"], tool=world["send"], outcome="success")
    assert LearnedRequest.objects.filter(tool=world["send"]).count() == 3
    [doc] = tool_docs_load(pks=[world["send"].pk])
    assert len(doc.learned) == 3  # the vectors the index embeds for it
    # Another tool of theirs has its own allowance.
    _log(world["member"], query="archive the newsletter", tools=("mail::archive_email",))
    assert search_outcome_record(principal=world["member"], tool=world["other"], outcome="success") is not None
    assert LearnedRequest.objects.filter(tool=world["other"]).count() == 1
    # Another person teaches their own requests, and confirms one of the first person's (it gains weight).
    permission_grant(actor=superuser, target=world["send"].server, action="discover", holder=outsider)
    permission_grant(actor=superuser, target=world["send"].server, action="execute", holder=outsider)
    second = principal_for_user(outsider)
    _log(second, query="send the report number 0 to finance")
    search_outcome_record(principal=second, tool=world["send"], outcome="success")
    assert LearnedRequest.objects.get(text="send the report number 0 to finance").principal_count == 2
    _log(second, query="mail the minutes to the board")
    search_outcome_record(principal=second, tool=world["send"], outcome="success")
    assert LearnedRequest.objects.filter(tool=world["send"]).count() == 4
    # The first person confirms an existing request still, past their allowance.
    _log(world["member"], query="mail the minutes to the board")
    search_outcome_record(principal=world["member"], tool=world["send"], outcome="success")
    assert LearnedRequest.objects.get(text="mail the minutes to the board").principal_count == 2
