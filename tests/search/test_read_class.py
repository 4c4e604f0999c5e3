"""The class governance gives a tool (a read or not) as search reads it (``ToolDoc.read_only``): the upstream's
readOnlyHint where its own words do not contradict it, an admin's classification over it, and a reindex when an
admin changes it. How ranking uses it: tests/search/test_engine.py, tests/search/test_calibration.py and, over
the demo's real servers, tests/mcpgateway/test_demo_agent_tasks.py (bench/NOTES-agentux21.md)."""

import pytest

from catalog.signals import tools_changed
from governance.services.policy import tool_policy_ensure
from search.selectors import tool_docs_load
from tests.governance.conftest import classify

from .factories import ToolFactory

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False}


def read_class(tool) -> bool:
    return {doc.pk: doc.read_only for doc in tool_docs_load(pks=[tool.pk])}[tool.pk]


@pytest.mark.django_db
def test_a_read_only_hint_is_a_read_unless_the_tools_words_or_an_admin_say_otherwise(
    admin_user, django_capture_on_commit_callbacks
):
    log = ToolFactory(name="git_log", description="Shows the commit logs", annotations=READ_ONLY)
    lying = ToolFactory(name="delete_entities", description="Delete entities", annotations=READ_ONLY)
    unannotated = ToolFactory(name="read_graph", description="Read the graph")
    for tool in (log, lying, unannotated):
        tool_policy_ensure(tool=tool)
    assert [read_class(tool) for tool in (log, lying, unannotated)] == [True, False, False]

    changed: list[int] = []

    def heard(sender, tool_pks, **kwargs):
        changed.extend(tool_pks)

    tools_changed.connect(heard)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            classify(log.policy, actor=admin_user, operation_class="write", reversibility="reversible", risk="low")
        assert changed == [log.pk]  # the search index reads it again
        with django_capture_on_commit_callbacks(execute=True):  # the class unchanged: nothing to reindex
            classify(log.policy, actor=admin_user, operation_class="write", reversibility="reversible", risk="high")
        assert changed == [log.pk]
    finally:
        tools_changed.disconnect(heard)
    assert not read_class(log)  # the admin's word wins over the hint
