"""search.text.close_tool_ids: the tool ids a mistyped one likely meant (the gateway's and the workbench's "did you
mean"). ORM-free."""

import pytest

from search.text import close_tool_ids

IDS = [
    "faulty::ping",
    "faulty::hang",
    "time::get_current_time",
    "time::convert_time",
    "calc::add",
    "git::git_log",
    "git::git_status",
    "git::git_reset",
    "everything::get-sum",
]


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("time::get_curent_time", "time::get_current_time"),  # a dropped letter
        ("get_current_time", "time::get_current_time"),  # the name without its server
        ("time__get_current_time", "time::get_current_time"),  # a direct listing's name
        ("Time::Get-Current-Time", "time::get_current_time"),  # case and separators
        ("time.get_current_time", "time::get_current_time"),
        ("everything::get_sum", "everything::get-sum"),
        ("git::gitlog", "git::git_log"),
        ("calc::ad", "calc::add"),
        ("faulty::pin", "faulty::ping"),
    ],
)
def test_a_mistyped_id_names_the_tool_meant(typed, meant):
    assert close_tool_ids(typed, IDS) == [meant]


@pytest.mark.parametrize(
    "typed", ["everything::get_env", "faulty::pong", "calc::no_such_tool", "weather::forecast", "", "x" * 400]
)
def test_nothing_close_names_nothing(typed):
    # "everything::get_env" is as far from "everything::get-sum" as "get_env" from "get_sum": within a server the
    # shared prefix counts for nothing (compared whole, the two ids scored 0.84).
    assert close_tool_ids(typed, IDS) == []
