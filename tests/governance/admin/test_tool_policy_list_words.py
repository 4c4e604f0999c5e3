"""The tool policies list says whether each tool's calls wait for an approver (what an operator reads it for), and who
set the risk class in words: "set by admin" was Django's red cross on every tool Scout classified from its hints, 36
of 36 in the demo, read as 36 errors (adminux34)."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from governance.models import ToolPolicy
from governance.roles import OPERATORS
from tests.governance.conftest import classify
from tests.governance.factories import ServerFactory, ToolFactory

pytestmark = pytest.mark.django_db


def test_each_row_says_whether_calls_wait_for_an_approver_and_who_set_the_class(client, django_user_model, superuser):
    server = ServerFactory(slug="memory")
    ToolFactory(server=server, name="delete_entities", annotations={"destructiveHint": True, "readOnlyHint": False})
    ToolFactory(server=server, name="read_graph", annotations={"readOnlyHint": True})
    reset = ToolFactory(server=server, name="reset_all", annotations={"readOnlyHint": True})
    classify(reset.policy, actor=superuser, operation_class="write", reversibility="irreversible", risk="critical")
    operator = django_user_model.objects.create_user(username="op", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    client.force_login(operator)
    html = client.get(reverse("admin:governance_toolpolicy_changelist")).content.decode()

    def cell(tool: str, field: str) -> str:
        shown = tool.replace("_", "_<wbr>")  # ids break at their separators
        row = html.split(f"memory::<wbr>{shown}<", 1)[1].split("</tr>", 1)[0]
        return row.split(f'class="field-{field}">', 1)[1].split("</td>", 1)[0]

    assert cell("delete_entities", "risk_column") == 'High<br><small class="approval-rule">approval: every call</small>'
    assert cell("read_graph", "risk_column") == 'Low<br><small class="approval-rule">approval: none</small>'
    assert cell("reset_all", "risk_column") == 'Critical<br><small class="approval-rule">approval: every call</small>'
    assert cell("reset_all", "by_admin") == "an admin"
    assert ">its hints</span>" in cell("read_graph", "by_admin")
    assert "icon-no" not in html.split('id="result_list"', 1)[1]  # no red cross left in the rows
    assert ToolPolicy.objects.get(tool=reset).needs_approval  # the words are the rule the gateway applies
