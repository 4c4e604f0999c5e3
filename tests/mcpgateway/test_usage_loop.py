"""The usage loop over HTTP against the live gateway: searches are logged, the calls that follow are linked
with their outcome, and a success teaches ranking without showing one user's words to another."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import MODERN, build_index, gateway_db, grant, make_token, make_user, mcp_client, run

pytestmark = [gateway_db, pytest.mark.slow]


@pytest.fixture
def world(gateway, admin_user, calc_server, faulty_server, settings) -> dict[str, Any]:
    settings.SCOUT_LEARNED_INDEX_INTERVAL = 0  # reindex learned requests at once (batched in production)
    alice, bob = make_user("gw_alice"), make_user("gw_bob")
    for user in (alice, bob):
        grant(admin_user, calc_server, user, "discover", "execute")
        grant(admin_user, faulty_server, user, "discover", "execute")
    build_index()
    return {"alice": make_token(alice), "bob": make_token(bob)}


def _session(gateway, token: str, steps: list[tuple[str, dict]]) -> list[Any]:
    async def main():
        async with mcp_client(gateway, token, mode=MODERN) as client:
            return [await client.call_tool(name, args) for name, args in steps]

    return run(main)


def test_a_search_is_logged_and_the_call_that_followed_is_linked(gateway, world):
    from search.models import LearnedRequest, QueryLogEntry, SearchOutcome

    found, ran = _session(
        gateway,
        world["alice"],
        [
            ("tool_search", {"query": "add two integers together"}),
            ("execute_tool", {"tool_id": "calc::add", "arguments": {"a": 2, "b": 3}}),
        ],
    )
    assert not ran.is_error
    entry = QueryLogEntry.objects.get()
    assert entry.query == "add two integers together" and entry.user.username == "gw_alice"
    assert entry.results[0]["tool_id"] == "calc::add" == found.structured_content["matches"][0]["tool_id"]
    assert entry.confidence == found.structured_content["confidence"] and entry.client == "mcp"
    outcome = SearchOutcome.objects.get()
    assert (outcome.entry_id, outcome.tool.tool_id, outcome.outcome) == (entry.pk, "calc::add", "success")
    learned = LearnedRequest.objects.get()
    assert learned.text == "add two integers together" and learned.tool.tool_id == "calc::add"


def test_the_redacted_log_masks_an_address_or_a_number_however_it_is_written(gateway, world, settings):
    """Privacy (redteam36): SCOUT_QUERY_LOG=redacted masks e-mail addresses and digits, but a zero-width space or a
    soft hyphen inside an address (text copied from a web page carries them), an HTML or percent escape of its "@",
    and numerals outside the decimal digits (➀, ❶, Ethiopic ፩) kept it from being masked: the request was stored, and
    shown to curators, reading as the address and number it held. Each is masked now, the learned request too."""
    from search.models import LearnedRequest

    written = {
        "add the invoice total for alice.jones\u200b@example.com": "add the invoice total for <email>",
        "add the total for bob\u00ad@example.org please": "add the total for <email> please",
        "add the figures of carol&commat;example.net": "add the figures of <email>",
        "add the figures of dave%40example.net": "add the figures of <email>",
        "add the amounts on card \u2780\u2781\u2782\u2783 \u2776\u2777\u2778\u2779 \u1369\u136a": (
            "add the amounts on card #### #### ##"
        ),
    }
    called = ("execute_tool", {"tool_id": "calc::add", "arguments": {"a": 1, "b": 2}})
    assert _logged_redacted(gateway, world, settings, list(written), called) == list(written.values())
    assert LearnedRequest.objects.get().text == "add the amounts on card #### #### ##"


def test_the_redacted_log_masks_cjk_numerals_letter_numerals_and_keys_written_in_groups(gateway, world, settings):
    """Privacy (redteam38): redteam36 masked every numeral of Unicode category N, but Chinese and Japanese numerals
    are letters (一三八零零一三八零零零, a telephone number; 五千, an amount), a Roman numeral (Ⅻ) became Latin letters
    under NFKC before it was masked, and a key typed in groups too short to be a token ("sk_live_51H8 xY2k 9QzT", a
    licence key "ABCD-12EF-GH34-IJ56") lost only its digits: each was stored, and shown to curators, readable. A run
    of two or more CJK numerals, a letter numeral, and a stretch of such groups are masked now; one numeral alone
    ("一下", "a little") and ordinary words in groups stay."""
    written = {
        "add the figures for 电话 一三八零零一三八零零零 and 五千元": "add the figures for 电话 ########### and ##元",
        "add chapter Ⅻ totals": "add chapter # totals",
        "add with key sk_live_51H8 xY2k 9QzT please": "add with key <token> please",
        "add licence ABCD-12EF-GH34-IJ56 seats": "add licence <token> seats",
        "add 一下 the read-only-database-connection counts": "add 一下 the read-only-database-connection counts",
    }
    assert _logged_redacted(gateway, world, settings, list(written)) == list(written.values())


def test_the_redacted_log_masks_secrets_in_urls_after_a_key_word_and_behind_a_known_prefix(gateway, world, settings):
    """Privacy (redteam57): the redacted mode masked a secret only when its characters did not read as words, so a
    link's query or fragment value ("?token=orangebanana", "#access_token=abc-def-ghi", "?password=hunter"), a value
    after "api-key:" or "Bearer", and a key behind a well-known prefix ("sk_test_AbcDefGhiJkl", "glpat-xyzw-abcd-efgh",
    "xoxp-abc-def-ghijklmnop") were stored, and shown to curators, as written. Each is masked now; a link's address
    and its parameters' names, and ordinary words after "key" or "token", stay."""
    written = {
        "add totals from https://example.com/cb?token=orangebanana&user=alice": (
            "add totals from https://example.com/cb?token=<value>&user=<value>"
        ),
        "add sums of https://example.com/#access_token=abc-def-ghi&token_type=bearer": (
            "add sums of https://example.com/#access_token=<value>&token_type=<value>"
        ),
        "add rows of https://db.example.com/x?password=hunter": "add rows of https://db.example.com/x?password=<value>",
        "add with api-key: qwerty-asdfgh-zxcvbn-poiuyt now": "add with api-key: <token> now",
        "add using Bearer abc.def.ghi": "add using Bearer <token>",
        "add with key sk_test_AbcDefGhiJkl and glpat-xyzw-abcd-efgh": "add with key <token> and <token>",
        "add token xoxp-abc-def-ghijklmnop totals": "add token <token> totals",
        "add the key figures and token counts": "add the key figures and token counts",
    }
    assert _logged_redacted(gateway, world, settings, list(written)) == list(written.values())


def _logged_redacted(gateway, world, settings, queries: list[str], *then: tuple[str, dict]) -> list[str]:
    """The query log's rows, oldest first, after alice searched ``queries`` (then made the calls ``then``) over HTTP
    with SCOUT_QUERY_LOG=redacted."""
    from search.models import QueryLogEntry

    settings.SCOUT_QUERY_LOG = "redacted"
    _session(gateway, world["alice"], [*(("tool_search", {"query": query, "top_k": 3}) for query in queries), *then])
    return list(QueryLogEntry.objects.order_by("pk").values_list("query", flat=True))


def test_each_outcome_kind_is_linked(gateway, world):
    from search.models import SearchOutcome

    _session(
        gateway,
        world["alice"],
        [
            ("tool_search", {"query": "add two integers", "top_k": 10}),
            ("execute_tool", {"tool_id": "calc::add", "arguments": {"a": "two", "b": 3}}),  # invalid
            ("tool_search", {"query": "store a note record", "top_k": 10}),
            ("execute_tool", {"tool_id": "faulty::record_note", "arguments": {"note": "x"}}),  # needs approval
            (
                "execute_tool",
                {"tool_id": "faulty::record_note", "arguments": {"note": "x"}, "approval_id": "apr_" + "B" * 22},
            ),  # a forged approval: denied
            ("tool_search", {"query": "answer with the given text, ping", "top_k": 10}),
            ("execute_tool", {"tool_id": "faulty::ping", "arguments": {"text": "hi"}}),  # success
        ],
    )
    kinds = {(o.tool.tool_id, o.outcome) for o in SearchOutcome.objects.select_related("tool")}
    assert kinds == {
        ("calc::add", "validation_error"),
        ("faulty::record_note", "pending_approval"),
        ("faulty::record_note", "denied"),
        ("faulty::ping", "success"),
    }


def test_polling_a_waiting_approval_is_said_as_pending_and_links_no_denial(gateway, world):
    """A model polls its waiting request as told: the answer says pending (not "approval_rejected", which reads as
    a refusal nobody gave), and the query log keeps the search's one pending outcome instead of a denial per poll."""
    from search.models import SearchOutcome

    call = {"tool_id": "faulty::record_note", "arguments": {"note": "x"}}
    _, asked = _session(
        gateway, world["alice"], [("tool_search", {"query": "store a note record"}), ("execute_tool", call)]
    )
    approval_id = asked.structured_content["approval_id"]
    polls = _session(gateway, world["alice"], [("execute_tool", {**call, "approval_id": approval_id})] * 2)
    for poll in polls:
        assert poll.is_error and poll.structured_content["approval_pending"] is True
        assert (
            poll.structured_content["approval_id"] == approval_id and "approval_rejected" not in poll.structured_content
        )
    assert [o.outcome for o in SearchOutcome.objects.all()] == ["pending_approval"]


def test_a_call_without_a_search_that_returned_the_tool_is_not_linked(gateway, world):
    from search.models import SearchOutcome

    _session(
        gateway,
        world["bob"],
        [
            ("tool_search", {"query": "add two integers", "top_k": 1}),
            ("execute_tool", {"tool_id": "faulty::ping", "arguments": {}}),  # not among that search's results
        ],
    )
    _session(gateway, world["alice"], [("execute_tool", {"tool_id": "calc::add", "arguments": {"a": 1, "b": 1}})])
    assert not SearchOutcome.objects.exists()  # alice never searched; bob's search returned calc::add only
    from search.models import QueryLogEntry

    assert [r["tool_id"] for r in QueryLogEntry.objects.get().results] == ["calc::add"]


def _teach(gateway, token: str, request: str) -> None:
    """A search for ``request`` and a successful call of calc::add after it: the request is learned."""
    _session(
        gateway,
        token,
        [
            ("tool_search", {"query": request, "top_k": 10}),
            ("execute_tool", {"tool_id": "calc::add", "arguments": {"a": 47, "b": 11}}),
        ],
    )


def _engine_why(username: str, query: str) -> dict[str, Any]:
    """The ranking's own explanation of calc::add for ``username``'s search (what the curator preview reads)."""
    from governance.principals import principal_for_user
    from search.services import search_for_principal

    result = search_for_principal(principal=principal_for_user(_user(username)), query=query, top_k=10)
    return next(match.why_matched for match in result.matches if match.tool_id == "calc::add")


def _why_lines_of(answer: Any, tool_id: str) -> list[str]:
    return next(m["why_matched"] for m in answer.structured_content["matches"] if m["tool_id"] == tool_id)


def test_learned_words_lift_the_tool_for_others_but_are_never_shown_to_them(gateway, world):
    """Alice's request lifts calc::add for bob, and nothing in bob's answer says that someone's request close to his
    led to it: "matches requests that led to this tool" confirmed a guess at another person's words (or the topic of
    their work) to anyone who may discover the tool. His why lines are those he got before she taught it."""
    private = "sum up the figures on invoice 4711 for acme"
    (before,) = _session(gateway, world["bob"], [("tool_search", {"query": private, "top_k": 10})])
    _teach(gateway, world["alice"], private)
    from search.models import LearnedRequest

    assert LearnedRequest.objects.get().text == private
    assert _engine_why("gw_bob", private)["closest"] == "learned"  # her request is calc::add's closest for him
    (answer,) = _session(gateway, world["bob"], [("tool_search", {"query": private, "top_k": 10})])
    matches = answer.structured_content["matches"]
    assert matches and matches[0]["tool_id"] == "calc::add"
    assert _why_lines_of(answer, "calc::add") == _why_lines_of(before, "calc::add")
    assert not any("led to this tool" in line for match in matches for line in match["why_matched"])
    dumped = str(answer.model_dump())
    assert "4711" not in dumped and "acme" not in dumped.lower().replace("calc", "")
    assert "led to this tool" not in dumped


def test_a_call_after_its_first_searchs_success_links_to_the_newer_search_that_returned_the_tool(gateway, world):
    """A search whose call of a tool succeeded was acted on: a later call of that tool after a newer search that
    returned it (lower) followed the newer search, and teaches its request, not the first one's again."""
    from search.models import LearnedRequest, QueryLogEntry, SearchOutcome

    first_search, first_call, second_search, second_call = _session(
        gateway,
        world["alice"],
        [
            ("tool_search", {"query": "add two integers together"}),
            ("execute_tool", {"tool_id": "calc::add", "arguments": {"a": 2, "b": 3}}),
            ("tool_search", {"query": "welcome Ann by name and count her points", "top_k": 10}),
            ("execute_tool", {"tool_id": "calc::add", "arguments": {"a": 7, "b": 8}}),
        ],
    )
    assert not first_call.is_error and not second_call.is_error
    first, second = QueryLogEntry.objects.order_by("created_at", "id")
    ids = [match["tool_id"] for match in second_search.structured_content["matches"]]
    # The control: the newer search returned calc::add, but lower than the first search did.
    assert first_search.structured_content["matches"][0]["tool_id"] == "calc::add" and ids.index("calc::add") > 0
    links = [(o.entry_id, o.outcome) for o in SearchOutcome.objects.order_by("created_at", "id")]
    assert links == [(first.pk, "success"), (second.pk, "success")]
    assert sorted(LearnedRequest.objects.values_list("text", flat=True)) == [
        "add two integers together",
        "welcome Ann by name and count her points",
    ]


def test_a_person_who_loses_execute_stops_lifting_what_they_taught(gateway, world, admin_user, calc_server):
    """Learning counts only people who may execute the tool (issue 8): once alice's grant is revoked, the request
    she taught no longer lifts the tool for bob, nor counts her among its principals."""
    from governance.services.permissions import permission_revoke
    from search.models import LearnedConfirmation, LearnedRequest

    private = "sum up the figures on invoice 4711 for acme"
    _teach(gateway, world["alice"], private)
    assert LearnedRequest.objects.get().principal_count == 1
    assert _engine_why("gw_bob", private)["closest"] == "learned"

    alice = LearnedConfirmation.objects.get().principal_key
    permission_revoke(actor=admin_user, target=calc_server, action="execute", holder=_user("gw_alice"))

    assert not LearnedConfirmation.objects.get(principal_key=alice).counts  # kept: counts again once she may
    assert not LearnedRequest.objects.filter(principal_count__gt=0).exists()
    assert _engine_why("gw_bob", private)["closest"] != "learned"


def _user(username: str):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=username)


def _teacher_in_a_team(gateway, admin_user, calc_server):
    """carol, who may execute calc::add through the group calc-team only, and taught it one request."""
    from django.contrib.auth.models import Group

    from search.models import LearnedRequest

    carol = make_user("gw_carol")
    team = Group.objects.create(name="calc-team")
    team.user_set.add(carol)
    grant(admin_user, calc_server, team, "discover", "execute")
    _teach(gateway, make_token(carol), "add two integers together")
    assert LearnedRequest.objects.get().principal_count == 1
    return carol, team


def test_a_person_made_inactive_stops_lifting_what_they_taught(gateway, world):
    from search.models import LearnedRequest

    _teach(gateway, world["alice"], "add two integers together")
    assert LearnedRequest.objects.get().principal_count == 1
    alice = _user("gw_alice")
    alice.is_active = False
    alice.save()
    assert LearnedRequest.objects.get().principal_count == 0


def test_a_person_who_leaves_the_tenant_stops_lifting_what_they_taught_its_tools(
    gateway, world, admin_user, calc_server
):
    """A tenant's learned requests are its people's words (Z12): one who leaves it stops shaping its ranking."""
    from governance.models import ServerTenant, Tenant
    from search.models import LearnedRequest

    carol = make_user("gw_carol")
    tenant = Tenant.objects.create(slug="calc-tenant", name="Calc")
    tenant.members.add(carol)
    ServerTenant.objects.create(server=calc_server, tenant=tenant)
    grant(admin_user, calc_server, carol, "discover", "execute")
    build_index()
    _teach(gateway, make_token(carol, tenant=tenant), "add two integers together")
    assert LearnedRequest.objects.get().principal_count == 1
    tenant.members.remove(carol)
    assert LearnedRequest.objects.get().principal_count == 0


@pytest.mark.parametrize(
    "lose_access",
    [
        pytest.param(lambda carol, team: team.user_set.remove(carol), id="leaves-the-group"),
        pytest.param(lambda carol, team: team.delete(), id="group-deleted"),
        pytest.param(lambda carol, team: carol.delete(), id="person-deleted"),
    ],
)
def test_a_group_members_teaching_is_withdrawn_once_the_group_no_longer_lets_them_execute(
    gateway, world, admin_user, calc_server, lose_access
):
    from search.models import LearnedRequest

    carol, team = _teacher_in_a_team(gateway, admin_user, calc_server)
    lose_access(carol, team)
    assert not LearnedRequest.objects.filter(principal_count__gt=0).exists()
