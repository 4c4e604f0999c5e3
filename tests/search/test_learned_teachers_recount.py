"""Learning counts only teachers who may execute the tool now (issue 8), whichever way access went, and counts them
again once it is back: ``search.usage.learned_teachers_recount``, run after every visibility change."""

import pytest
from django.contrib.auth import get_user_model

from catalog.choices import ServerStatus
from governance.models import ServerTenant
from governance.services.permissions import permission_grant, permission_revoke
from search.documents import learned_weight
from search.models import LearnedConfirmation, LearnedRequest
from search.selectors import tool_docs_load
from tests.governance.factories import EntitlementFactory, ServerFactory, ToolFactory, tenant_with
from tests.search.factories import teach

pytestmark = pytest.mark.django_db
REQUEST = "send the quarterly numbers to finance"


@pytest.fixture
def world(member, superuser, settings):
    settings.SCOUT_LEARNED_INDEX_INTERVAL = -1  # flush inline, not on a timer
    return two_teachers(member, superuser)


def two_teachers(member, superuser) -> dict:
    """member and bob may execute mail::send_email and each taught it REQUEST."""
    server = ServerFactory(slug="mail")
    send = ToolFactory(server=server, name="send_email", description="Send an e-mail message.")
    bob = get_user_model().objects.create_user(username="bob")
    for person in (member, bob):
        for action in ("discover", "execute"):
            permission_grant(actor=superuser, target=server, action=action, holder=person)
    for person in (member, bob):
        _teach(person, send)
    assert LearnedRequest.objects.get().principal_count == 2
    return {"send": send, "server": server, "member": member, "bob": bob, "superuser": superuser}


def _teach(person, tool, request=REQUEST) -> None:
    teach(person, tool, request)


def _indexed_weight(tool) -> float:
    """The weight the index takes for the learned request (what ranks the tool for everyone)."""
    docs = tool_docs_load(pks=[tool.pk])  # none for a tool not indexed at all (disabled)
    return dict(docs[0].learned).get(REQUEST, 0.0) if docs else 0.0


def _revoke_execute(w):
    permission_revoke(actor=w["superuser"], target=w["server"], action="execute", holder=w["member"])


def _grant_execute(w):
    permission_grant(actor=w["superuser"], target=w["server"], action="execute", holder=w["member"])


def _require_an_entitlement_bob_holds(w):
    entitlement = EntitlementFactory(slug="finance")
    entitlement.users.add(w["bob"])
    w["send"].policy.required_entitlements.add(entitlement)
    w["entitlement"] = entitlement


def _set(obj, **fields):
    for name, value in fields.items():
        setattr(obj, name, value)
    obj.save()


def _held(w, held):
    _set(w["send"].policy, held=held)


def _tenant_of_both(w):
    """The server becomes tenant acme's (its learning is forgotten: taught again by both, acme's members)."""
    acme = tenant_with("acme", w["member"], w["bob"])
    ServerTenant.objects.create(server=w["server"], tenant=acme)
    for person in (w["member"], w["bob"]):
        _teach(person, w["send"])
    w["acme"] = acme


# (set up, lose access, get it back): each a different way the member's execute on the tool goes.
WAYS = {
    "grant-revoked": (None, _revoke_execute, _grant_execute),
    "entitlement-removed": (
        _require_an_entitlement_bob_holds,
        lambda w: None,  # the member never held it: adding the requirement took their access
        lambda w: w["entitlement"].users.add(w["member"]),
    ),
    "tool-held": (None, lambda w: _held(w, True), lambda w: _held(w, False)),
    "tool-disabled": (None, lambda w: _set(w["send"], enabled=False), lambda w: _set(w["send"], enabled=True)),
    "server-archived": (
        None,
        lambda w: _set(w["server"], status=ServerStatus.ARCHIVED),
        lambda w: _set(w["server"], status=ServerStatus.ACTIVE),
    ),
    "person-deactivated": (
        None,
        lambda w: _set(w["member"], is_active=False),
        lambda w: _set(w["member"], is_active=True),
    ),
    "left-the-tenant": (
        _tenant_of_both,
        lambda w: w["acme"].members.remove(w["member"]),
        lambda w: w["acme"].members.add(w["member"]),
    ),
}


@pytest.mark.parametrize("way", list(WAYS))
def test_a_teacher_who_loses_execute_stops_counting_and_counts_again_once_it_is_back(
    world, way, django_capture_on_commit_callbacks
):
    setup, lose, regain = WAYS[way]
    with django_capture_on_commit_callbacks(execute=True):
        if setup:
            setup(world)
        lose(world)
    learned = LearnedRequest.objects.get()
    everyone_lost = way in ("tool-held", "tool-disabled", "server-archived")  # bob too
    assert learned.principal_count == (0 if everyone_lost else 1)
    member = LearnedConfirmation.objects.get(principal_key=f"u{world['member'].pk}")
    assert member.counts is False  # kept, to count again
    if everyone_lost:
        assert _indexed_weight(world["send"]) == 0.0
    else:
        assert _indexed_weight(world["send"]) == learned_weight(1)

    with django_capture_on_commit_callbacks(execute=True):
        regain(world)
    assert LearnedRequest.objects.get().principal_count == 2
    assert _indexed_weight(world["send"]) == learned_weight(2)


def test_a_deleted_teachers_confirmation_goes_and_a_request_only_they_taught_with_it(
    world, django_capture_on_commit_callbacks
):
    _teach(world["member"], world["send"], request="mail the report to my boss")
    with django_capture_on_commit_callbacks(execute=True):
        world["member"].delete()
    assert list(LearnedRequest.objects.values_list("text", "principal_count")) == [(REQUEST, 1)]
    assert list(LearnedConfirmation.objects.values_list("principal_key", flat=True)) == [f"u{world['bob'].pk}"]


def test_a_teacher_who_may_execute_again_and_confirms_counts_at_once(world, django_capture_on_commit_callbacks):
    """Back by a change the recount has not seen yet: their next confirmation counts them again."""
    permission_revoke(actor=world["superuser"], target=world["server"], action="execute", holder=world["member"])
    with django_capture_on_commit_callbacks(execute=True):
        permission_revoke(actor=world["superuser"], target=world["server"], action="execute", holder=world["bob"])
    assert LearnedRequest.objects.get().principal_count == 0
    _grant_execute(world)  # its recount never runs (not captured)
    _teach(world["member"], world["send"])
    assert LearnedRequest.objects.get().principal_count == 1


# --- the periodic safety net: counts right again whatever event was lost ---------------------------------------


def test_a_revocation_whose_recount_was_lost_is_repaired_by_the_beats_recount(world):
    """The recount is queued by the visibility change (after commit); a task the broker lost left the revoked
    teacher counting until some later change queued another, however long that took. The beat runs it too."""
    from search.tasks import recount_learned_teachers
    from tests.celery_results import task_result

    _revoke_execute(world)  # its recount never runs (on_commit callbacks not captured): lost
    assert LearnedRequest.objects.get().principal_count == 2

    assert task_result(recount_learned_teachers.delay()) == 1  # what the beat sends
    assert LearnedRequest.objects.get().principal_count == 1
    assert _indexed_weight(world["send"]) == learned_weight(1)


def test_a_count_left_wrong_by_a_race_is_repaired_by_the_recount(world, django_capture_on_commit_callbacks):
    """A confirmation and a recount at once (the recount's count read before the confirmation committed) leave
    ``principal_count`` off from the confirmations that count, with no confirmation to flip: the recount compares
    every count with its confirmations and repairs it (and the index weight)."""
    LearnedRequest.objects.update(principal_count=7)

    with django_capture_on_commit_callbacks(execute=True):
        from search.usage import learned_teachers_recount

        assert learned_teachers_recount() == 1
    assert LearnedRequest.objects.get().principal_count == 2
    assert _indexed_weight(world["send"]) == learned_weight(2)


def test_the_beat_recounts_learned_teachers_hourly():
    from scoutsite import celery_app
    from scoutsite.celery import setup_periodic_tasks

    setup_periodic_tasks(celery_app)
    entry = celery_app.conf.beat_schedule["search: recount learned teachers"]
    assert entry["task"] == "search.tasks.recount_learned_teachers"
    assert entry["schedule"] == 3600.0
