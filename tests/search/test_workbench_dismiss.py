"""Dismissing a workbench request no tool should serve: it leaves the workbench and the home count for the
curator's tenant only, later requests with the same words stay out, and "Restore" brings it back."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from governance.constants import OTHER_TENANT_PERSON
from governance.models import Tenant
from governance.principals import principal_for_user
from governance.roles import CURATORS
from search.engine.ranking import Confidence
from search.models import DismissedRequest, QueryLogEntry
from search.usage import query_log_record
from search.workbench import WORKBENCH_DAYS, dismissal_key, group_key
from tests.governance.factories import tenant_with

pytestmark = [pytest.mark.django_db]
WORKBENCH = "search_workbench"
FLIGHT = "book a flight to Lisbon"


def _curator(django_user_model, username="cur", *tenants):
    user = django_user_model.objects.create_user(username=username, is_staff=True)
    user.groups.add(Group.objects.get(name=CURATORS))
    for slug in tenants:
        tenant_with(slug, user)
    return user


def _log(user, query, confidence=Confidence.NONE):
    return query_log_record(
        principal=principal_for_user(user),
        query=query,
        results=[],
        confidence=confidence,
        degraded=False,
        backend="embedded",
        latency_ms=5,
    )


def _waiting(client) -> dict:
    return client.get(reverse("admin:index")).context["curator_panel"]["workbench"]


def _listed(client, query: str = "") -> list[str]:
    return [group.text for group in client.get(reverse(WORKBENCH) + query).context["groups"]]


def _dismiss(client, text: str):
    return client.post(reverse(WORKBENCH), {"action": "dismiss", "text": text}, follow=True)


def test_a_dismissed_request_leaves_the_list_and_the_count_and_its_words_stay_out(client, django_user_model, member):
    curator = _curator(django_user_model)
    _log(member, FLIGHT)
    _log(member, "order a pizza", Confidence.LOW)
    client.force_login(curator)
    assert _waiting(client) == {"total": 2, "withheld": 1, "low": 1, "unfollowed": 0}

    response = _dismiss(client, FLIGHT)
    [message] = [str(m) for m in response.context["messages"]]
    assert message.startswith(f"Dismissed “{FLIGHT}”: no tool should serve it.")
    assert 'id="dismissed-link"' in response.content.decode()
    row = DismissedRequest.objects.get()
    assert (row.text, row.dismissed_by, row.tenant) == (FLIGHT, curator, None)
    assert row.key == dismissal_key(group_key(FLIGHT))
    assert _listed(client) == ["order a pizza"] and _listed(client, "?reason=withheld") == []
    assert _waiting(client) == {"total": 1, "withheld": 0, "low": 1, "unfollowed": 0}

    # The same words again (any order or case) stay dismissed; other words are listed.
    _log(member, "Lisbon: book a FLIGHT to")
    _log(member, "book a train to Lisbon")
    assert _listed(client) == ["book a train to Lisbon", "order a pizza"]
    assert [str(m) for m in _dismiss(client, FLIGHT).context["messages"]] == [f"“{FLIGHT}” already was dismissed."]
    assert DismissedRequest.objects.count() == 1


def test_the_query_log_entry_no_longer_leads_to_the_workbench_once_dismissed(client, django_user_model, member):
    curator = _curator(django_user_model)
    entry = _log(member, FLIGHT)
    client.force_login(curator)
    page = reverse("admin:search_querylogentry_change", args=[entry.pk])
    assert 'id="entry-workbench"' in client.get(page).content.decode()
    _dismiss(client, FLIGHT)
    assert 'id="entry-workbench"' not in client.get(page).content.decode()


def test_restore_lists_it_again(client, django_user_model, member):
    curator = _curator(django_user_model)
    _log(member, FLIGHT)
    client.force_login(curator)
    _dismiss(client, FLIGHT)
    page = client.get(reverse(WORKBENCH) + "?reason=dismissed")
    [row] = page.context["dismissed"]
    html = page.content.decode()
    assert f'<tr class="dismissed-request" data-text="{FLIGHT}">' in html and ">cur</td>" in html
    assert ">dismissed (1)</a>" in html
    assert _waiting(client)["total"] == 0

    response = client.post(reverse(WORKBENCH), {"action": "restore", "key": row.key}, follow=True)
    [message] = [str(m) for m in response.context["messages"]]
    assert message.startswith(f"Restored “{FLIGHT}”")
    assert not DismissedRequest.objects.exists()
    assert 'id="dismissed-empty"' in response.content.decode()
    assert _listed(client) == [FLIGHT]
    assert _waiting(client) == {"total": 1, "withheld": 1, "low": 0, "unfollowed": 0}


def test_a_dismissal_in_one_tenant_changes_nothing_another_tenants_curators_see(client, django_user_model, member):
    """``member`` acts in no tenant: the request is shared, read by both tenants' curators."""
    alpha = _curator(django_user_model, "alpha-cur", "alpha")
    bravo = _curator(django_user_model, "bravo-cur", "bravo")
    _log(member, FLIGHT)
    other = Client()
    other.force_login(bravo)
    assert _waiting(other)["total"] == 1  # counted (and cached) before alpha dismisses

    client.force_login(alpha)
    _dismiss(client, FLIGHT)
    assert DismissedRequest.objects.get().tenant.slug == "alpha"
    assert _listed(client) == [] and _waiting(client)["total"] == 0

    assert _listed(other) == [FLIGHT] and _waiting(other) == {"total": 1, "withheld": 1, "low": 0, "unfollowed": 0}
    page = other.get(reverse(WORKBENCH) + "?reason=dismissed")
    assert page.context["dismissed"] == [] and ">dismissed (0)</a>" in page.content.decode()
    # Bravo's curator cannot restore alpha's dismissal, and is answered as if there were none.
    key = dismissal_key(group_key(FLIGHT))
    response = other.post(reverse(WORKBENCH), {"action": "restore", "key": key}, follow=True)
    assert [str(m) for m in response.context["messages"]] == ["Nothing to restore: that request is not dismissed."]
    assert DismissedRequest.objects.filter(tenant__slug="alpha").exists()
    assert _listed(client) == []


def test_dismissing_needs_the_workbench_permissions_and_a_csrf_token(client, django_user_model, member):
    _log(member, FLIGHT)
    staff = django_user_model.objects.create_user(username="staff", is_staff=True)
    client.force_login(staff)
    assert client.post(reverse(WORKBENCH), {"action": "dismiss", "text": FLIGHT}).status_code == 403
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(_curator(django_user_model))
    assert strict.post(reverse(WORKBENCH), {"action": "dismiss", "text": FLIGHT}).status_code == 403
    assert not DismissedRequest.objects.exists()
    assert _listed(strict) == [FLIGHT]


def test_a_curator_in_two_tenants_dismisses_and_restores_in_both(client, django_user_model, member):
    both = _curator(django_user_model, "both-cur", "alpha", "bravo")
    bravo = _curator(django_user_model, "bravo-cur", "bravo")
    _log(member, FLIGHT)
    client.force_login(both)
    _dismiss(client, FLIGHT)
    assert sorted(DismissedRequest.objects.values_list("tenant__slug", flat=True)) == ["alpha", "bravo"]
    page = client.get(reverse(WORKBENCH) + "?reason=dismissed")
    assert [row.text for row in page.context["dismissed"]] == [FLIGHT]  # listed once
    other = Client()
    other.force_login(bravo)
    assert _listed(other) == []  # dismissed for bravo, whose curator they also are

    client.post(reverse(WORKBENCH), {"action": "restore", "key": dismissal_key(group_key(FLIGHT))})
    assert not DismissedRequest.objects.exists()
    assert _listed(client) == [FLIGHT] and _listed(other) == [FLIGHT]


def test_a_dismissal_never_shows_one_tenants_words_to_another_tenants_curators(client, django_user_model):
    """Z12: a curator in tenants A and B dismissed a request only B's agents made; it was kept in A too, so A's
    curators read B's words in their dismissed list (and who dismissed it). A superuser's dismissal of B's request
    was kept for the curators in no tenant, who read shared requests only. A dismissal is now kept only in the
    tenants whose requests hold its words (each of the curator's tenants for shared requests or their own words)."""
    both = _curator(django_user_model, "both-cur", "alpha", "bravo")
    alpha = _curator(django_user_model, "alpha-cur", "alpha")
    bravo = _curator(django_user_model, "bravo-cur", "bravo")
    nobody = _curator(django_user_model, "shared-cur")  # a curator in no tenant: shared requests only
    boss = django_user_model.objects.create_superuser(username="boss")
    asker = django_user_model.objects.create_user(username="bravo-agent")
    tenant_with("bravo", asker)
    secret, pizza = "merge the Zephyr acquisition files", "order a pizza for the Zephyr board"
    _log(asker, secret)
    _log(asker, pizza)
    readers = {user: Client() for user in (alpha, bravo, nobody)}
    for user, reader in readers.items():
        reader.force_login(user)

    client.force_login(both)
    assert set(_listed(client)) == {secret, pizza}
    _dismiss(client, secret)
    assert list(DismissedRequest.objects.values_list("tenant__slug", flat=True)) == ["bravo"]
    assert _listed(client) == [pizza]  # gone for the curator who dismissed it
    boss_client = Client()
    boss_client.force_login(boss)
    _dismiss(boss_client, pizza)
    assert sorted(DismissedRequest.objects.values_list("tenant__slug", flat=True)) == ["bravo", "bravo"]
    assert _listed(boss_client) == [] and _listed(client) == []

    for user, reader in readers.items():
        page = reader.get(reverse(WORKBENCH) + "?reason=dismissed")
        shown = [row.text for row in page.context["dismissed"]]
        html = page.content.decode()
        if user == bravo:
            assert sorted(shown) == sorted([secret, pizza]) and ">both-cur</td>" in html
        else:
            assert shown == [] and "Zephyr" not in html and "both-cur" not in html
    # Who dismissed it is named only while the reader may see them: not once they belong to another tenant only.
    Tenant.objects.get(slug="bravo").members.remove(both)
    html = readers[bravo].get(reverse(WORKBENCH) + "?reason=dismissed").content.decode()
    assert "both-cur" not in html and f">{OTHER_TENANT_PERSON}</td>" in html


def test_a_dismissals_words_are_kept_no_longer_than_the_log_keeps_requests(client, django_user_model, member, settings):
    """Privacy: a dismissal's words are a request copied from the query log (a customer's name, an address), kept
    until restored, long after the log purged the request itself (``SCOUT_QUERY_LOG_RETENTION_DAYS``), as learned
    requests once were. Past the retention only its key stays: later requests with those words stay out, and it is
    still restored from the dismissed list."""
    from datetime import timedelta

    from django.utils import timezone

    from search.usage import query_log_purge

    settings.SCOUT_QUERY_LOG_RETENTION_DAYS = 7
    curator = _curator(django_user_model)
    private, recent = "refund Mrs Quillfeather at 12 Larkspur Lane", "book a train to Porto"
    for text in (private, recent):
        _log(member, text)
    client.force_login(curator)
    for text in (private, recent):
        _dismiss(client, text)
    DismissedRequest.objects.filter(text=private).update(dismissed_at=timezone.now() - timedelta(days=8))

    query_log_purge()
    assert sorted(DismissedRequest.objects.values_list("text", flat=True)) == ["", recent]
    page = client.get(reverse(WORKBENCH) + "?reason=dismissed")
    html = page.content.decode()
    assert "Quillfeather" not in html and "its words are no longer kept" in html and recent in html
    _log(member, "Refund Mrs Quillfeather at 12 Larkspur lane")  # the same words: still out
    assert _listed(client) == []
    key = dismissal_key(group_key(private))
    response = client.post(reverse(WORKBENCH), {"action": "restore", "key": key}, follow=True)
    assert [str(m) for m in response.context["messages"]][0].startswith("Restored the request (its words were no")
    assert _listed(client) == ["Refund Mrs Quillfeather at 12 Larkspur lane"]


def test_a_superuser_restores_a_dismissal_only_in_the_tenant_it_was_made_in(client, django_user_model):
    """A superuser reads every tenant's dismissals; the list showed one row per request and "Restore" lifted the
    dismissal in every tenant, undoing other tenants' curators' decisions. Each tenant's is now its own row."""
    alpha, bravo = _curator(django_user_model, "alpha-cur", "alpha"), _curator(django_user_model, "bravo-cur", "bravo")
    for slug in ("alpha", "bravo"):
        asker = django_user_model.objects.create_user(username=f"{slug}-agent")
        tenant_with(slug, asker)
        _log(asker, FLIGHT)
    readers = {user: Client() for user in (alpha, bravo)}
    for user, reader in readers.items():
        reader.force_login(user)
        _dismiss(reader, FLIGHT)
    assert sorted(DismissedRequest.objects.values_list("tenant__slug", flat=True)) == ["alpha", "bravo"]
    boss = django_user_model.objects.create_superuser(username="boss")
    client.force_login(boss)

    page = client.get(reverse(WORKBENCH) + "?reason=dismissed")
    rows = {row.tenant.slug: row for row in page.context["dismissed"]}
    html = page.content.decode()
    assert rows.keys() == {"alpha", "bravo"}
    assert 'data-label="Tenant">Alpha</td>' in html and 'data-label="Tenant">Bravo</td>' in html
    form = {"action": "restore", "key": rows["alpha"].key, "tenant": str(rows["alpha"].tenant_id)}
    response = client.post(reverse(WORKBENCH), form, follow=True)

    assert [str(m) for m in response.context["messages"]][0].startswith(f"Restored “{FLIGHT}”")
    assert list(DismissedRequest.objects.values_list("tenant__slug", flat=True)) == ["bravo"]
    assert _listed(readers[alpha]) == [FLIGHT] and _listed(readers[bravo]) == []
    # A tenant given that holds no such dismissal restores nothing.
    response = client.post(reverse(WORKBENCH), {**form, "tenant": "x"}, follow=True)
    assert [str(m) for m in response.context["messages"]] == ["Nothing to restore: that request is not dismissed."]
    assert DismissedRequest.objects.count() == 1


def test_a_restore_naming_a_tenant_in_other_digits_or_past_any_id_restores_nothing(client, django_user_model):
    """The restore form's tenant is a tenant's id as the page wrote it; any other text restores nothing. "²" (and "①",
    other digits str.isdigit() takes but int() does not) answered 500 with a traceback logged (redteam37), and an id
    past any database integer must not reach the query either."""
    alpha = _curator(django_user_model, "alpha-cur", "alpha")
    asker = django_user_model.objects.create_user(username="alpha-agent")
    tenant_with("alpha", asker)
    _log(asker, FLIGHT)
    client.force_login(alpha)
    _dismiss(client, FLIGHT)
    row = DismissedRequest.objects.get()
    for tenant in ("²", "①", "99999999999999999999", "-1", " 1"):
        form = {"action": "restore", "key": row.key, "tenant": tenant}
        response = client.post(reverse(WORKBENCH), form, follow=True)
        assert response.status_code == 200, tenant
        assert [str(m) for m in response.context["messages"]] == ["Nothing to restore: that request is not dismissed."]
    assert DismissedRequest.objects.count() == 1


def test_a_dismissal_keeps_the_whole_group_out_and_its_later_paraphrases(client, django_user_model, member):
    """ "Later requests with the same words" now means the same group: a paraphrase asked before or after the
    dismissal stays out, and its query log entry no longer leads to the workbench; another request is listed."""
    curator = _curator(django_user_model)
    _log(member, "Book flights to lisbon?")
    _log(member, FLIGHT)
    client.force_login(curator)
    [group] = client.get(reverse(WORKBENCH)).context["groups"]
    assert group.text == FLIGHT and group.count == 2
    _dismiss(client, FLIGHT)
    later = _log(member, "booking a flight to Lisbon, please")
    _log(member, "book a train to Lisbon")
    assert _listed(client) == ["book a train to Lisbon"]
    assert _waiting(client)["total"] == 1
    page = reverse("admin:search_querylogentry_change", args=[later.pk])
    assert 'id="entry-workbench"' not in client.get(page).content.decode()
    assert list(DismissedRequest.objects.values_list("text", flat=True)) == [FLIGHT]
    # Once the dismissed wording itself is older than the workbench reads, its paraphrases still stay out.
    QueryLogEntry.objects.exclude(pk=later.pk).update(created_at=timezone.now() - timedelta(days=WORKBENCH_DAYS + 1))
    assert _listed(client) == []


def test_a_group_of_two_tenants_wordings_is_dismissed_in_each_in_its_own_words(client, django_user_model):
    """Z12: a curator in alpha and bravo sees alpha's and bravo's paraphrases as one group and dismisses it; each
    tenant keeps the dismissal in its own agents' words, so alpha's curators never read bravo's wording."""
    both = _curator(django_user_model, "both-cur", "alpha", "bravo")
    alpha = _curator(django_user_model, "alpha-cur", "alpha")
    bravo = _curator(django_user_model, "bravo-cur", "bravo")
    askers = {}
    for slug in ("alpha", "bravo"):
        askers[slug] = django_user_model.objects.create_user(username=f"{slug}-agent")
        tenant_with(slug, askers[slug])
    ours, theirs = "book a flight to Lisbon", "Book flights to Lisbon for Zephyr"
    _log(askers["alpha"], ours)
    _log(askers["bravo"], theirs)
    client.force_login(both)
    [group] = client.get(reverse(WORKBENCH)).context["groups"]
    assert (group.text, group.count) == (theirs, 2)
    _dismiss(client, group.text)
    kept = dict(DismissedRequest.objects.values_list("tenant__slug", "text"))
    assert kept == {"alpha": ours, "bravo": theirs}
    assert _listed(client) == []
    for user, shown in ((alpha, [ours]), (bravo, [theirs])):
        reader = Client()
        reader.force_login(user)
        assert _listed(reader) == []
        page = reader.get(reverse(WORKBENCH) + "?reason=dismissed")
        assert [row.text for row in page.context["dismissed"]] == shown
        assert ("Zephyr" in page.content.decode()) == (user == bravo)
