"""Z12, the shared rows that name a person: a tenant-less token's audit events and approval requests are shared,
but when its person is tenant B's, an admin of tenant A reads "someone in another tenant", never the name (not
in a list, a page, a filter, a search, a mail); the policy versions likewise name who bumped them only where
visible. Superusers read every name. Lists stay one query for the names, however many rows."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from governance.constants import OTHER_TENANT_PERSON
from governance.models import AuditEvent
from governance.roles import OPERATORS
from governance.services.approvals import approval_request_create
from governance.services.audit import audit_record
from governance.services.policy import policy_version_bump
from governance.services.tokens import api_token_create, api_token_verify
from tests.governance.factories import tenant_with

pytestmark = pytest.mark.django_db


def _tenantless_principal(user):
    _, raw = api_token_create(
        user=user, name=f"{user.get_username()} token", scopes=["discover", "execute"], expires_at=_tomorrow()
    )
    return api_token_verify(raw)


def _tomorrow():
    return timezone.now() + timedelta(days=1)


@pytest.fixture
def abroad(django_user_model, grant, server, mutating_tool):
    """bob-b (tenant B) and sam-shared (no tenant) call the shared github server with tenant-less tokens;
    ann-a is tenant A's operator and approver, bea-b tenant B's approver."""
    bob = django_user_model.objects.create_user(username="bob-b", email="bob@example.com")
    sam = django_user_model.objects.create_user(username="sam-shared", email="sam@example.com")
    ann = django_user_model.objects.create_user(username="ann-a", email="ann@example.com", is_staff=True)
    bea = django_user_model.objects.create_user(username="bea-b", email="bea@example.com", is_staff=True)
    ann.groups.add(Group.objects.get(name=OPERATORS))
    tenant_with("tenant-a", ann)
    tenant_with("tenant-b", bob, bea)
    for caller in (bob, sam):
        grant(caller, server, "discover", "execute")
    for approver in (ann, bea):
        grant(approver, server, "approve")
    return {"bob": _tenantless_principal(bob), "sam": _tenantless_principal(sam), "ann": ann, "bea": bea}


def _searched(principal, tool, times: int = 1) -> None:
    for _ in range(times):
        audit_record(event_type="discovery", principal=principal, tool=tool, outcome="success", payload={})


def test_a_shared_event_of_another_tenants_person_names_them_nowhere(client, abroad, mutating_tool, superuser):
    _searched(abroad["bob"], mutating_tool)
    _searched(abroad["sam"], mutating_tool)
    bobs = AuditEvent.objects.filter(human_subject="bob-b")
    assert bobs.exists()  # the token's creation and the search: both shared, both bob's
    client.force_login(abroad["ann"])
    changelist = reverse("admin:governance_auditevent_changelist")
    html = client.get(changelist).content.decode()
    assert "sam-shared" in html and OTHER_TENANT_PERSON in html
    assert "bob-b" not in html  # not a row, not the people filter
    for page in (
        client.get(changelist, {"q": "bob"}),  # not found by name
        client.get(changelist, {"user__id__exact": bobs[0].user_id}),  # nor by id
    ):
        assert page.status_code == 200
        assert "bob-b" not in page.content.decode() and "0 audit events" in page.content.decode()
    # bob-b's own events (subject, chain, title, the token's payload) and the grants made to him (the payload's
    # holder); every event here is shared.
    naming_bob = [*bobs, *AuditEvent.objects.filter(event_type="grant", payload__holder="user:bob-b")]
    assert len(naming_bob) == 4
    sams_grant = AuditEvent.objects.filter(event_type="grant", payload__holder="user:sam-shared").first()
    sams_page = client.get(reverse("admin:governance_auditevent_change", args=[sams_grant.pk]))
    assert "user:sam-shared" in sams_page.content.decode()  # a shared person's grant names them
    for event in naming_bob:
        page = client.get(reverse("admin:governance_auditevent_change", args=[event.pk]))
        assert page.status_code == 200
        html = page.content.decode()
        assert "bob-b" not in html and OTHER_TENANT_PERSON in html, event.event_type

    client.force_login(superuser)
    assert "bob-b" in client.get(changelist).content.decode()
    assert "bob-b" in client.get(changelist, {"q": "bob"}).content.decode()


def test_the_audit_list_names_people_in_a_constant_number_of_queries(client, abroad, mutating_tool):
    _searched(abroad["bob"], mutating_tool)
    _searched(abroad["sam"], mutating_tool)
    client.force_login(abroad["ann"])
    url = reverse("admin:governance_auditevent_changelist")
    client.get(url)  # warm: sessions, content types

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured)

    few = queries()
    _searched(abroad["bob"], mutating_tool, times=15)
    _searched(abroad["sam"], mutating_tool, times=15)
    assert queries() == few


@pytest.fixture
def bobs_request(abroad, mutating_tool):
    return approval_request_create(principal=abroad["bob"], tool=mutating_tool, arguments={"repo": "scout"})


def test_a_shared_request_of_another_tenants_person_does_not_name_them(client, abroad, bobs_request, superuser):
    """Tenant A's approver reads who asked as someone in another tenant in the inbox, on the request's page and on
    the home page; a search by the name finds nothing. Tenant B's approver and a superuser read the name."""
    client.force_login(abroad["ann"])
    changelist = reverse("admin:governance_approvalrequest_changelist")
    decide = reverse("admin:governance_approvalrequest_decide", args=[bobs_request.pk])
    home = reverse("admin:index")  # the approver's panel: requests waiting, who asked
    for url, listed in ((changelist, bobs_request.approval_id), (decide, bobs_request.approval_id), (home, "Decide")):
        page = client.get(url)
        assert page.status_code == 200, url
        html = page.content.decode()
        assert listed in html and OTHER_TENANT_PERSON in html, url
        assert "bob-b" not in html, url
    html = client.get(decide).content.decode()
    assert f"human subject: {OTHER_TENANT_PERSON}" in html and f"user:{OTHER_TENANT_PERSON}" in html
    assert bobs_request.approval_id not in client.get(changelist, {"q": "bob"}).content.decode()

    for reader in (abroad["bea"], superuser):
        client.force_login(reader)
        assert "human subject: bob-b" in client.get(decide).content.decode(), reader


def test_a_decided_request_names_another_tenants_decider_and_requester_as_someone(
    client, abroad, bobs_request, mutating_tool
):
    from governance.services.approvals import approval_decide

    approval_decide(request=bobs_request, approver=abroad["bea"], approve=False, reason="no")
    client.force_login(abroad["ann"])
    html = client.get(reverse("admin:governance_approvalrequest_decide", args=[bobs_request.pk])).content.decode()
    assert "bea-b" not in html and f"decided by {OTHER_TENANT_PERSON}" in html
    # Tenant A's approver decides another of bob-b's requests: the decision's audit event is theirs to read, and
    # its payload (who asked) does not name him.
    other = approval_request_create(principal=abroad["bob"], tool=mutating_tool, arguments={"repo": "other"})
    approval_decide(request=other, approver=abroad["ann"], approve=False, reason="not today")
    event = AuditEvent.objects.get(event_type="approval.denied", approval_ref=other.approval_id)
    page = client.get(reverse("admin:governance_auditevent_change", args=[event.pk]))
    assert page.status_code == 200
    assert "bob-b" not in page.content.decode() and "not today" in page.content.decode()


def test_the_approval_mail_names_the_requester_only_to_approvers_who_may_see_them(
    client, abroad, mutating_tool, mailoutbox, django_capture_on_commit_callbacks, django_user_model, grant, superuser
):
    """Tenant B's approver reads bob-b; tenant A's reads someone in another tenant, in a mail of their own; the
    notification log shows tenant A's operator the mails to tenant A's and shared approvers, not tenant B's."""
    shared = django_user_model.objects.create_user(username="sol", email="sol@example.com", is_staff=True)
    grant(shared, mutating_tool.server, "approve")
    with django_capture_on_commit_callbacks(execute=True):
        approval_request_create(principal=abroad["bob"], tool=mutating_tool, arguments={"repo": "scout"})
    by_recipient = {tuple(message.to): message.body for message in mailoutbox}
    assert set(by_recipient) == {("ann@example.com",), ("bea@example.com",), ("sol@example.com",)}
    assert by_recipient[("ann@example.com",)].startswith(f"{OTHER_TENANT_PERSON} asks to call github::delete_repo")
    assert "bob-b" not in by_recipient[("ann@example.com",)]
    assert by_recipient[("bea@example.com",)].startswith("bob-b asks to call github::delete_repo")

    log = reverse("admin:governance_notificationattempt_changelist")
    client.force_login(abroad["ann"])
    html = client.get(log).content.decode()
    assert "ann@example.com" in html and "sol@example.com" in html
    assert "bea@example.com" not in html and "3 notification" not in html
    assert "bea@example.com" not in client.get(log, {"q": "bea"}).content.decode()
    client.force_login(superuser)
    assert "bea@example.com" in client.get(log).content.decode()


def test_a_policy_version_names_another_tenants_operator_as_someone(client, abroad, superuser):
    version = policy_version_bump(reason="tenant B reclassified a tool", actor=abroad["bea"])
    client.force_login(abroad["ann"])
    for url in (
        reverse("admin:governance_policyversion_changelist"),
        reverse("admin:governance_policyversion_change", args=[version.pk]),
    ):
        page = client.get(url)
        assert page.status_code == 200, url
        html = page.content.decode()
        assert "tenant B reclassified a tool" in html and OTHER_TENANT_PERSON in html, url
        assert "bea-b" not in html, url
    client.force_login(superuser)
    assert "bea-b" in client.get(reverse("admin:governance_policyversion_changelist")).content.decode()


def test_a_hidden_name_is_no_lookup_in_the_query_string(client, abroad, mutating_tool, django_user_model):
    """A name tenant A's operator reads masked cannot be spelled out through the query string either:
    ``?human_subject__startswith=b`` on the audit list, or ``?agent__startswith=b`` on the audit list and the
    inbox, counted the rows of bob-b and his agent one letter at a time (and ``?user=`` told which user ids have
    rows). Every lookup on those fields answers 400, the same bytes for a name or id that has rows and one that
    has none; other filters still work."""
    from governance.models import Agent

    bob = django_user_model.objects.get(username="bob-b")
    agent = Agent.objects.create(user=bob, name="bob-b-agent")
    _, raw = api_token_create(user=bob, name="bob agent token", scopes=["execute"], expires_at=_tomorrow(), agent=agent)
    bobs_agent = api_token_verify(raw)
    _searched(bobs_agent, mutating_tool)
    approval_request_create(principal=bobs_agent, tool=mutating_tool, arguments={"repo": "scout"})
    assert AuditEvent.objects.filter(human_subject="bob-b", agent="bob-b-agent").exists()

    client.force_login(abroad["ann"])
    audit = reverse("admin:governance_auditevent_changelist")
    inbox = reverse("admin:governance_approvalrequest_changelist")
    probes = [(audit, f"human_subject{lookup}") for lookup in ("", "__startswith", "__iexact", "__in", "__gt")]
    probes += [(url, f"agent{lookup}") for url in (audit, inbox) for lookup in ("", "__istartswith", "__contains")]
    for url, key in probes:
        there = client.get(url, {key: "bob-b-agent" if key.startswith("agent") else "bob-b"})
        absent = client.get(url, {key: "zz"})
        assert there.status_code == absent.status_code == 400, (url, key)
        assert there.content == absent.content, (url, key)
    # Nor which user ids have rows: the people filter's own parameter keeps to visible people (test above).
    ids = [(audit, key) for key in ("user", "user_id", "user__in", "user__gte")]
    ids += [(inbox, key) for key in ("requester", "requester_id", "decided_by", "decided_by__isnull")]
    for url, key in ids:
        there, absent = client.get(url, {key: bob.pk}), client.get(url, {key: 999999})
        assert there.status_code == absent.status_code == 400, (url, key)
        assert there.content == absent.content, (url, key)
    assert client.get(audit, {"outcome__exact": "success"}).status_code == 200
    assert client.get(audit, {"user__id__exact": bob.pk}).status_code == 200
    assert client.get(inbox, {"status__exact": "pending"}).status_code == 200


def test_the_audit_search_says_what_it_finds_and_finds_the_masked_rows_as_shown(client, abroad, mutating_tool):
    """Searching a person of another tenant by name finds nothing (Z12): the search box says so, and what it
    finds them as."""
    _searched(abroad["bob"], mutating_tool)
    client.force_login(abroad["ann"])
    changelist = reverse("admin:governance_auditevent_changelist")
    html = client.get(changelist).content.decode()
    assert "a tool id (server::tool), an approval id or a trace id" in html
    assert f"is found as “{OTHER_TENANT_PERSON}”" in html
    found = client.get(changelist, {"q": OTHER_TENANT_PERSON}).content.decode()
    assert "0 audit events" not in found and "bob-b" not in found
    assert found.count(f'<td class="field-subject">{OTHER_TENANT_PERSON}</td>') >= 1


def test_a_masked_persons_token_is_named_nowhere_nor_found_by_its_ref(client, abroad, mutating_tool, superuser):
    """The token reference (``tok-<id>``) of a person tenant A's staff read as someone in another tenant groups that
    person's searches, calls and requests: it is shown on neither the audit event's page, the query log entry's
    nor the approval's, and ``?token_ref=`` finds none of their rows (the same answer as for a token with no rows);
    a visible person's token is still shown and found (the token page's link to its audit trail)."""
    from governance.roles import CURATORS
    from search.models import QueryLogEntry
    from search.usage import query_log_record

    bob, sam = abroad["bob"], abroad["sam"]
    for principal in (bob, sam):
        _searched(principal, mutating_tool)
        query_log_record(
            principal=principal,
            query=f"words of {principal.human_subject}",
            results=[],
            confidence="low",
            degraded=False,
            backend="bm25",
            latency_ms=1.0,
        )
    bobs_request = approval_request_create(principal=bob, tool=mutating_tool, arguments={"repo": "scout"})
    ann = abroad["ann"]
    ann.groups.add(Group.objects.get(name=CURATORS))
    client.force_login(ann)

    audit = reverse("admin:governance_auditevent_changelist")
    log = reverse("admin:search_querylogentry_changelist")
    nobody = client.get(audit, {"token_ref": "tok-999999"})
    assert nobody.status_code == 200 and "0 audit events" in nobody.content.decode()
    found = client.get(audit, {"token_ref": bob.token_ref})
    assert (found.status_code, "0 audit events" in found.content.decode()) == (200, True)
    assert (
        "1 audit event" in client.get(audit, {"token_ref": sam.token_ref, "event_type": "discovery"}).content.decode()
    )
    inbox = reverse("admin:governance_approvalrequest_changelist")
    probes = [(url, key) for url in (log, inbox) for key in ("token_ref", "token_ref__startswith", "token_ref__in")]
    probes += [(inbox, "token"), (inbox, "token__id__exact")]
    for url, key in probes:
        value = bob.token_ref if key.startswith("token_ref") else bob.token_id
        there, absent = client.get(url, {key: value}), client.get(url, {key: "tok-999999"})
        assert there.status_code == absent.status_code == 400, (url, key)
        assert there.content == absent.content, (url, key)

    bobs_event = AuditEvent.objects.get(human_subject="bob-b", event_type="discovery")
    bobs_entry = QueryLogEntry.objects.get(user__username="bob-b")
    sams_entry = QueryLogEntry.objects.get(user__username="sam-shared")
    pages = {
        "audit": reverse("admin:governance_auditevent_change", args=[bobs_event.pk]),
        "log": reverse("admin:search_querylogentry_change", args=[bobs_entry.pk]),
        "decide": reverse("admin:governance_approvalrequest_decide", args=[bobs_request.pk]),
    }
    for name, url in pages.items():
        page = client.get(url)
        assert page.status_code == 200, name
        assert not re.search(rf"\b{bob.token_ref}\b", page.content.decode()), name
    assert (
        sam.token_ref in client.get(reverse("admin:search_querylogentry_change", args=[sams_entry.pk])).content.decode()
    )

    client.force_login(superuser)
    for name, url in pages.items():
        assert bob.token_ref in client.get(url).content.decode(), name
