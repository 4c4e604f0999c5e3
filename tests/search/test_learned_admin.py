"""The curator's list of learned requests: says what to do with them, and leads to each tool (read what it does
before promoting users' words to it)."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from governance.roles import CURATORS
from search.models import LearnedRequest
from tests.governance.factories import ServerFactory, ToolFactory

pytestmark = pytest.mark.django_db


def test_the_list_says_what_to_do_and_links_each_tool(client, django_user_model):
    curator = django_user_model.objects.create_user(username="cur", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    tool = ToolFactory(server=ServerFactory(slug="mail"), name="list_inbox")
    LearnedRequest.objects.create(tool=tool, text="did my landlord write", key="k1", principal_count=2, confirmations=5)
    client.force_login(curator)
    page = client.get(reverse("admin:search_learnedrequest_changelist"))
    html = page.content.decode()
    assert page.context["title"].startswith("Learned requests — promote the right ones")
    tool_url = reverse("admin:catalog_tool_change", args=[tool.pk])
    assert f'<a href="{tool_url}">mail::<wbr>list_<wbr>inbox</a>' in html
    assert ">Callers</a>" in html and ">Successful calls</a>" in html
    assert '<td class="field-callers">2</td>' in html and '<td class="field-calls">5</td>' in html
    assert client.get(tool_url).status_code == 200


def _curator(django_user_model, username="cur"):
    user = django_user_model.objects.create_user(username=username, is_staff=True)
    user.groups.add(Group.objects.get(name=CURATORS))
    return user


def test_a_learned_request_is_promoted_or_rejected_on_its_own_page(client, django_user_model):
    """Its page was all read-only fields under "Change learned request" and a Save that saved nothing: it is
    named for the tool and decided there, then leads back to what that tool learned."""
    from search.choices import LearnedStatus

    tool = ToolFactory(server=ServerFactory(slug="mail"), name="list_inbox")
    learned = LearnedRequest.objects.create(tool=tool, text="did my landlord write", key="k1", principal_count=2)
    other = LearnedRequest.objects.create(tool=tool, text="any post from the bank", key="k2", principal_count=1)
    client.force_login(_curator(django_user_model))
    url = reverse("admin:search_learnedrequest_change", args=[learned.pk])
    page = client.get(url)
    html = page.content.decode()
    assert page.context["title"] == "Learned request for mail::list_inbox"
    assert 'name="_promote"' in html and 'name="_reject"' in html and 'name="_save"' not in html
    assert "Change learned request" not in html
    # Its words in the breadcrumbs, not "<tool pk>: … (2 principals)"; no hash key, which says nothing to a curator.
    assert "› did my landlord write" in html.replace("&rsaquo;", "›") and "principals)" not in html
    assert "hash of the normalised text" not in html

    response = client.post(url, {"_promote": "1"})
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('admin:search_learnedrequest_changelist')}?tool__id__exact={tool.pk}"
    learned.refresh_from_db()
    assert learned.status == LearnedStatus.PROMOTED
    assert list(tool.examples.values_list("text", flat=True)) == ["did my landlord write"]
    assert 'name="_promote"' not in client.get(url).content.decode()  # promoted: only reject is left

    client.post(reverse("admin:search_learnedrequest_change", args=[other.pk]), {"_reject": "1"})
    other.refresh_from_db()
    assert other.status == LearnedStatus.REJECTED and tool.examples.count() == 1


def test_a_tenant_curator_reads_a_shared_tools_learned_request_without_deciding_it(client, django_user_model):
    from search.choices import LearnedStatus
    from tests.governance.factories import tenant_with

    curator = _curator(django_user_model, "cur-a")
    tenant_with("tenant-a", curator)
    tool = ToolFactory(server=ServerFactory(slug="shared-srv"), name="lookup")
    learned = LearnedRequest.objects.create(tool=tool, text="find the record", key="k1", principal_count=1)
    client.force_login(curator)
    url = reverse("admin:search_learnedrequest_change", args=[learned.pk])
    html = client.get(url).content.decode()
    assert 'name="_promote"' not in html and 'id="learned-shared"' in html
    client.post(url, {"_promote": "1"})
    learned.refresh_from_db()
    assert learned.status == LearnedStatus.LEARNED and not tool.examples.exists()


QUOTED = "These are other people's words, and an example request is quoted to every caller whose search finds its tool"


def test_promoting_says_first_that_the_words_will_be_quoted_to_every_caller(client, django_user_model):
    """Privacy: a promoted learned request is an example request, which search explanations (why_matched) quote
    to every caller that finds the tool. Both places a curator promotes from say so before the button."""
    from search.choices import LearnedStatus

    tool = ToolFactory(server=ServerFactory(slug="mail"), name="list_inbox")
    learned = LearnedRequest.objects.create(tool=tool, text="did my landlord write", key="k1", principal_count=2)
    client.force_login(_curator(django_user_model))
    listed = client.get(reverse("admin:search_learnedrequest_changelist")).content.decode()
    assert 'id="promote-quoted"' in listed and QUOTED in listed
    assert listed.index('id="promote-quoted"') < listed.index('name="action"')  # above the action that promotes
    url = reverse("admin:search_learnedrequest_change", args=[learned.pk])
    html = client.get(url).content.decode()
    assert QUOTED in html and "so promote only words any of them may read" in html
    assert html.index('id="promote-quoted"') < html.index('name="_promote"')
    learned.status = LearnedStatus.PROMOTED
    learned.save()
    assert QUOTED not in client.get(url).content.decode()  # nothing left to promote: no warning about it


def test_who_decided_is_named_only_where_the_curator_may_see_them(client, django_user_model):
    """Z12: a learned request's page named who promoted or rejected it as a username, also a person of another tenant
    only (a curator since moved there); and ``?decided_by__exact=<id>`` told by the row count which person ids had
    decided the curator's rows. Who decided is masked as the query log masks who asked, and not looked up by id."""
    from governance.constants import OTHER_TENANT_PERSON
    from governance.models import ServerTenant
    from tests.governance.factories import tenant_with

    curator, colleague = _curator(django_user_model, "cur-a"), _curator(django_user_model, "cur-a2")
    moved = _curator(django_user_model, "moved-to-b")
    tenant_a = tenant_with("tenant-a", curator, colleague)
    tenant_with("tenant-b", moved)
    server = ServerFactory(slug="mail")
    ServerTenant.objects.create(server=server, tenant=tenant_a)
    tool = ToolFactory(server=server, name="list_inbox")
    by_moved = LearnedRequest.objects.create(tool=tool, text="did my landlord write", key="k1", decided_by=moved)
    by_colleague = LearnedRequest.objects.create(
        tool=tool, text="any post from the bank", key="k2", decided_by=colleague
    )
    client.force_login(curator)

    page = client.get(reverse("admin:search_learnedrequest_change", args=[by_moved.pk])).content.decode()
    assert "moved-to-b" not in page and OTHER_TENANT_PERSON in page
    page = client.get(reverse("admin:search_learnedrequest_change", args=[by_colleague.pk])).content.decode()
    assert "cur-a2" in page
    listed = reverse("admin:search_learnedrequest_changelist")
    assert client.get(f"{listed}?decided_by__exact={moved.pk}").status_code == 400
    assert client.get(f"{listed}?decided_by__username__startswith=m").status_code == 400


def test_an_empty_list_says_how_requests_are_learned_and_where_to_go_meanwhile(client, django_user_model, settings):
    """ "0 learned requests" and nothing else was a dead end for a new curator."""
    client.force_login(_curator(django_user_model))
    url = reverse("admin:search_learnedrequest_changelist")
    html = client.get(url).content.decode()
    assert "Nothing learned yet. A request is learned when an agent searches in new words" in html
    assert f'href="{reverse("search_workbench")}"' in html
    filtered = client.get(url, {"status__exact": "promoted"}).content.decode()
    assert "No learned request matches these filters." in filtered
    settings.SCOUT_LEARNING = False
    assert "learning from calls is off (SCOUT_LEARNING)" in client.get(url).content.decode()


def test_a_learned_requests_page_names_its_counts_as_the_list_does_and_says_if_search_uses_it(
    client, django_user_model
):
    """ "Principal count", "Confirmations" and a red cross beside "its current weight is in the search index" were the
    gateway's words: the page says callers and successful calls, as its list, and whether searches use it yet."""
    tool = ToolFactory(server=ServerFactory(slug="mail"), name="list_inbox")
    learned = LearnedRequest.objects.create(tool=tool, text="did my landlord write", key="k1", principal_count=2,
                                            confirmations=5, pending_since=timezone.now())  # fmt: skip
    client.force_login(_curator(django_user_model))
    url = reverse("admin:search_learnedrequest_change", args=[learned.pk])
    html = client.get(url).content.decode()
    assert "Callers:" in html and "Successful calls:" in html
    assert "Principal count" not in html and "Confirmations" not in html and "Pending since" not in html
    assert "waiting for the next index update since" in html
    LearnedRequest.objects.filter(pk=learned.pk).update(indexed=True, pending_since=None)
    assert "yes: searches use its current weight" in client.get(url).content.decode()


def test_the_tool_page_lists_what_it_learned_to_decide(client, django_user_model):
    """Behind a bare "Learned requests" button, a wrong learned request ("order a pizza" for get_current_time) ranked
    searches while the tool's page looked like a tool that learned nothing (adminux29)."""
    from django.contrib.admin.models import LogEntry

    from search.choices import LearnedStatus

    tool = ToolFactory(server=ServerFactory(slug="time"), name="get_current_time")
    other_tool = ToolFactory(server=ServerFactory(slug="mail"), name="list_inbox")
    pizza = LearnedRequest.objects.create(tool=tool, text="order a pizza for tonight", key="k1", principal_count=1)
    LearnedRequest.objects.create(tool=tool, text="time in Tokyo", key="k2", principal_count=2, confirmations=3)
    LearnedRequest.objects.create(tool=tool, text="clock in Paris", key="k3", status=LearnedStatus.PROMOTED)
    LearnedRequest.objects.create(tool=other_tool, text="did my landlord write", key="k4", principal_count=1)
    curator = _curator(django_user_model)
    client.force_login(curator)
    tool_url = reverse("admin:catalog_tool_change", args=[tool.pk])
    page = client.get(tool_url)
    html = page.content.decode()
    assert page.context["learned_waiting_count"] == 2
    assert "Learned requests (2 to decide)</a>" in html and "Learned from agents' calls: 2 to decide" in html
    listed = html.split('id="tool-learned-waiting"', 1)[1].split("</fieldset>", 1)[0]
    assert "order a pizza for tonight" in listed and "time in Tokyo" in listed
    assert "clock in Paris" not in listed and "did my landlord write" not in listed  # decided; another tool's
    back = f"_changelist_filters=tool__id__exact%3D{tool.pk}&amp;_from_tool=1"
    decide = f"{reverse('admin:search_learnedrequest_change', args=[pizza.pk])}?{back}"
    assert f'href="{decide}"' in listed

    # Decided on its page, then back to the tool's, where the next one waits (it led to the learned requests' list):
    # its form posts with the mark (Django's form address keeps only the list's filters).
    form = client.get(decide.replace("&amp;", "&")).content.decode().split('id="learnedrequest_form"', 1)[0]
    assert "_from_tool=1" in form.rsplit("<form", 1)[1]
    response = client.post(decide.replace("&amp;", "&"), {"_reject": "1"})
    assert response["Location"] == f"{tool_url}#tool-learned-waiting"
    pizza.refresh_from_db()
    assert pizza.status == LearnedStatus.REJECTED
    # Written on the tool's history (its page's History, its curator's recent actions), not "No fields changed.", and
    # without the words, which the history would keep past the query log's retention.
    assert [entry.get_change_message() for entry in LogEntry.objects.filter(user=curator)] == [
        "Rejected a learned request"
    ]
    assert LogEntry.objects.get(user=curator).object_id == str(tool.pk)
    assert client.get(tool_url).context["learned_waiting_count"] == 1


def test_a_learned_request_already_an_example_of_its_tool_is_no_decision_to_ask_for(client, django_user_model):
    """A learned request whose words a curator already made an example request of the tool (typed on its page,
    attached from the workbench) was listed on the tool's page and counted on the home page as one to decide:
    promoting it adds nothing. It is left out of both; the same words for another tool still wait there."""
    tool = ToolFactory(server=ServerFactory(slug="mail"), name="send_email")
    other = ToolFactory(server=ServerFactory(slug="chat"), name="post_message")
    tool.examples.create(text="Send an email to Bob")
    LearnedRequest.objects.create(tool=tool, text="send an email to bob", key="k1", principal_count=2)
    LearnedRequest.objects.create(tool=tool, text="mail the team the agenda", key="k2", principal_count=1)
    LearnedRequest.objects.create(tool=other, text="send an email to bob", key="k3", principal_count=1)
    client.force_login(_curator(django_user_model))
    page = client.get(reverse("admin:catalog_tool_change", args=[tool.pk]))
    listed = page.content.decode().split('id="tool-learned-waiting"', 1)[1].split("</fieldset>", 1)[0]
    assert page.context["learned_waiting_count"] == 1
    assert "mail the team the agenda" in listed and "send an email to bob" not in listed
    assert client.get(reverse("admin:index")).context["curator_panel"]["learned_count"] == 2  # k2 and k3
    assert client.get(reverse("admin:catalog_tool_change", args=[other.pk])).context["learned_waiting_count"] == 1


def test_the_homes_to_decide_count_opens_a_list_of_as_many(client, django_user_model):
    """The home said "Learned requests to decide: 1" and its link listed 2: "learned" also held a request whose words
    were already an example request of its tool (adminux32). The link lists the rows it counts; the list marks the
    other one as already an example."""
    tool = ToolFactory(server=ServerFactory(slug="git"), name="git_log")
    tool.examples.create(text="show me the latest commits")
    LearnedRequest.objects.create(tool=tool, text="Show me the latest commits", key="k1", principal_count=1)
    LearnedRequest.objects.create(tool=tool, text="who committed last", key="k2", principal_count=1)
    client.force_login(_curator(django_user_model))
    home = client.get(reverse("admin:index"))
    link = home.content.decode().split('id="learned-to-decide" href="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    listed = client.get(link)
    assert [row.text for row in listed.context["cl"].result_list] == ["who committed last"]
    assert home.context["curator_panel"]["learned_count"] == 1
    everything = client.get(reverse("admin:search_learnedrequest_changelist")).content.decode()
    assert everything.count("already an example request</span>") == 1
