"""Names and ids in narrow admin columns: break points after their separators, a span that may break anywhere only
around a stretch the browser cannot break otherwise (no space, no hyphen) longer than LONG_RUN."""

from catalog.admin.display import LONG_RUN, breakable_id, breakable_name


def test_a_long_run_without_a_break_may_break_anywhere():
    name = "financereportingwarehouseconnector"
    assert len(name) > LONG_RUN
    assert str(breakable_id(f"{name}::get_report")) == (f'<span class="scout-long">{name}::</span><wbr>get_<wbr>report')
    assert str(breakable_name(name)) == f'<span class="scout-long">{name}</span>'


def test_words_the_browser_breaks_at_their_spaces_or_hyphens_stay_whole():
    # 25 characters, none of its words near LONG_RUN: marking it made "someone in another tenant" a span, and the
    # audit trail's masked person no longer read as its column's plain text.
    for name in ("someone in another tenant", "someone-in-another-tenant-of-ours"):
        assert len(name) > LONG_RUN
        assert str(breakable_name(name)) == name


def test_names_are_escaped():
    assert str(breakable_name("<b>konstantinopoulou.alexandra</b>")) == (
        "&lt;b&gt;konstantinopoulou.<wbr>alexandra&lt;/<wbr>b&gt;"
    )
