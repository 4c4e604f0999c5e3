"""Grouping similar requests for the curator's workbench (issue 8), on real requests' wording: what a curator would
call one piece of work is one group, and what needs a different tool (or another person) is not."""

import random

from search.grouping import Grouper, group_words, request_words, similar, wordings

EMAIL = ("send an email to bob", "send email to Bob please", "send an e-mail to bob")


def _groups(texts: list[str]) -> list[list[str]]:
    grouper, groups = Grouper(), {}
    for text in texts:
        groups.setdefault(grouper.add(text), []).append(text)
    return list(groups.values())


def test_paraphrases_with_stopwords_punctuation_case_hyphens_and_plurals_are_one_group():
    texts = [*EMAIL, "Send e-mails to Bob!", "sending an email to bob"]
    assert {request_words(text) for text in texts} == {frozenset({"send", "email", "bob"})}
    assert _groups(texts) == [texts]
    assert _groups(["list_files in the repo", "list the files in my repo", "List files, repo?"]) == [
        ["list_files in the repo", "list the files in my repo", "List files, repo?"]
    ]


def test_a_near_duplicate_joins_and_a_different_request_does_not():
    assert _groups(["weather in Tokyo", "what's the weather in tokyo today?", "weather in Paris"]) == [
        ["weather in Tokyo"],
        ["what's the weather in tokyo today?"],  # "what" and "today": two words more, of four
        ["weather in Paris"],
    ]
    assert _groups(["weather in Tokyo", "weather in Tokyo today"]) == [["weather in Tokyo", "weather in Tokyo today"]]
    # Another person, another operation, another object: each its own work.
    apart = ["send an email to alice", "send an email to bob", "delete the file notes.txt", "read the file notes.txt"]
    assert _groups(apart) == [[text] for text in apart]
    assert not similar(request_words("delete file"), request_words("read file"))


def test_a_group_is_compared_with_its_first_words_so_a_chain_of_small_changes_does_not_walk_it():
    chain = ["create invoice customer acme", "create invoice customer globex", "create invoice vendor globex"]
    assert [len(group) for group in _groups(chain)] == [1, 1, 1]
    assert [len(group) for group in _groups(["open jira ticket login bug", "open jira ticket login bug now"])] == [2]


def test_requests_of_stopwords_or_symbols_only_group_by_their_characters():
    assert group_words("?!") == frozenset({"?!"}) and group_words("Is  it") == frozenset({"is it"})
    assert _groups(["is it", "IS  IT", "?!", "it is"]) == [["is it", "IS  IT"], ["?!"], ["it is"]]


def test_a_marked_group_takes_later_paraphrases_and_earlier_ones():
    grouper = Grouper()
    dismissed = grouper.mark("book a flight to Lisbon", "dismissed")
    assert grouper.add("Book flights to lisbon?") is dismissed and dismissed.mark == "dismissed"
    waiting = grouper.add("book a train to Lisbon")
    assert waiting is not dismissed and waiting.mark is None
    assert grouper.mark("booking trains to Lisbon", "dismissed") is waiting and waiting.mark == "dismissed"


def test_distinct_wordings_most_asked_first_with_counts():
    texts = ["send an e-mail to bob", "send email to Bob please", "send an email to bob", "Send an email  to Bob"]
    assert wordings([*texts, "send email to Bob please"]) == [
        ("send email to Bob please", 2),
        ("send an email to bob", 2),
        ("send an e-mail to bob", 1),
    ]


def test_the_indexed_grouping_finds_what_comparing_every_group_finds():
    """The index (prefix filtering) only saves comparisons: over requests sharing common words, in several
    wordings and lengths, it groups exactly as comparing each request with every group's first words in turn."""
    rng = random.Random(8)
    verbs, things = ["send", "list", "find", "book", "sending", "lists"], ["email", "e-mail", "file", "flight", "thing"]
    tails = ["", " please", " to bob", " to bob today", " for the team now", f" {rng.randrange(9)}"]
    texts = [f"{rng.choice(verbs)} the {rng.choice(things)}{rng.choice(tails)}{rng.choice(tails)}" for _ in range(400)]
    leaders: list[frozenset[str]] = []
    expected = []
    for text in texts:
        words = group_words(text)
        found = next((n for n, leader in enumerate(leaders) if similar(words, leader)), None)
        if found is None:
            found = len(leaders)
            leaders.append(words)
        expected.append(found)
    grouper = Grouper(texts)
    assert [grouper.clusters.index(grouper.add(text)) for text in texts] == expected
    assert 10 < len(leaders) < 300  # groups of several, not one group nor all apart
