"""The cache of recent request vectors: a repeated request skips the model and gets the same vector."""

import numpy as np
import pytest

from search.encoder import query_cache


@pytest.fixture(autouse=True)
def empty_cache():
    query_cache().clear()
    yield
    query_cache().clear()


def test_a_repeated_request_is_not_encoded_again_and_gets_the_same_vector(encoder):
    first = encoder.encode_queries(["send an invoice to a customer"])
    calls = encoder.calls
    again = encoder.encode_queries(["send an invoice to a customer"])
    assert encoder.calls == calls  # served from the cache: the model did not run
    np.testing.assert_array_equal(again, first)
    np.testing.assert_array_equal(first[0], encoder.encode(["send an invoice to a customer"])[0])


def test_only_the_new_texts_of_a_batch_are_encoded_in_their_order(encoder):
    known = encoder.encode_queries(["list my open tickets"])[0]
    texts = encoder.texts_encoded
    both = encoder.encode_queries(["archive the old reports", "list my open tickets"])
    assert encoder.texts_encoded == texts + 1
    np.testing.assert_array_equal(both[1], known)
    np.testing.assert_array_equal(both[0], encoder.encode(["archive the old reports"])[0])


def test_the_key_is_the_exact_text_and_the_model(encoder):
    encoder.encode_queries(["Delete the file"])
    calls = encoder.calls
    encoder.encode_queries(["delete the file"])  # another text: encoded
    assert encoder.calls == calls + 1
    assert query_cache().get(("another-model", "", "Delete the file")) is None


def test_a_vector_cached_in_one_scope_is_not_a_hit_in_another(encoder):
    encoder.encode_queries(["merge the pull request"], scope="u1")
    calls = encoder.calls
    encoder.encode_queries(["merge the pull request"], scope="u1")
    assert encoder.calls == calls
    encoder.encode_queries(["merge the pull request"], scope="u2")
    assert encoder.calls == calls + 1


@pytest.mark.django_db
def test_a_persons_search_is_never_served_from_anothers_cached_vector(
    encoder, small_catalog, reindex, django_user_model
):
    """A hit skips the model, most of a search's time: served from tenant A's cached vector, tenant B's search
    answered faster and told B that someone asked the same words (Z10). Only the person's own repeat is a hit."""
    from governance.models import Tenant
    from governance.principals import principal_for_user
    from search.services import index_rebuild, search_for_principal

    reindex(index_rebuild)
    people = []
    for name in ("alice", "bob"):
        user = django_user_model.objects.create_user(name)
        Tenant.objects.create(slug=f"{name}-co", name=name).members.add(user)
        people.append(principal_for_user(user))
    alice, bob = people
    request = "read the quarterly report file from disk"
    search_for_principal(principal=alice, query=request)
    encoded = encoder.texts_encoded
    search_for_principal(principal=alice, query=request)
    assert encoder.texts_encoded == encoded  # her own repeat: from the cache
    search_for_principal(principal=bob, query=request)
    assert encoder.texts_encoded > encoded  # another person: the model runs, as for a request nobody made


def test_the_cache_is_bounded_and_drops_the_least_recently_used(encoder, settings):
    settings.SCOUT_SEARCH_QUERY_CACHE_SIZE = 2
    encoder.encode_queries(["one"])
    encoder.encode_queries(["two"])
    encoder.encode_queries(["one"])  # a hit: "two" is now the oldest
    encoder.encode_queries(["three"])
    assert len(query_cache()) == 2
    calls = encoder.calls
    encoder.encode_queries(["one"])
    assert encoder.calls == calls
    encoder.encode_queries(["two"])
    assert encoder.calls == calls + 1


def test_size_zero_turns_the_cache_off(encoder, settings):
    settings.SCOUT_SEARCH_QUERY_CACHE_SIZE = 0
    encoder.encode_queries(["find a meeting slot"])
    calls = encoder.calls
    encoder.encode_queries(["find a meeting slot"])
    assert encoder.calls == calls + 1


def test_cached_vectors_cannot_be_changed_by_a_caller(encoder):
    vector = encoder.encode_queries(["rename a branch"])[0]
    vector[0] = 99.0  # the stacked result is the caller's copy
    np.testing.assert_array_equal(
        encoder.encode_queries(["rename a branch"])[0], encoder.encode(["rename a branch"])[0]
    )


def test_the_cache_keeps_no_request_text(encoder, settings):
    """Its keys are digests: what outlives a search in the cache is the request's vector, never its words."""
    settings.SCOUT_QUERY_LOG = "off"
    secret = "wire 40000 to account 9911 for Ms Quarterwhistle"
    encoder.encode_queries([secret])
    assert len(query_cache()) == 1
    kept = repr(query_cache()._entries.keys())
    assert "Quarterwhistle" not in kept and "9911" not in kept
    calls = encoder.calls
    encoder.encode_queries([secret])  # still found by its text
    assert encoder.calls == calls


@pytest.mark.django_db
def test_no_request_text_is_kept_past_its_search(small_catalog, reindex, encoder, settings, django_user_model):
    """With SCOUT_QUERY_LOG=off nothing may keep a request's words beyond the search: the tokenizer's cache held
    the last thousand requests' texts for the process's lifetime (a memory dump read them)."""
    from governance.principals import principal_for_user
    from search.services import index_rebuild, search_for_principal
    from search.text import _request_terms, request_terms

    settings.SCOUT_QUERY_LOG = "off"
    reindex(index_rebuild)
    secret = "wire 40000 to account 9911 for Ms Quarterwhistle"
    search_for_principal(principal=principal_for_user(django_user_model.objects.create_user("ann")), query=secret)
    assert _request_terms.get() is None  # the request's memo ended with it
    assert request_terms(secret) is not request_terms(secret)  # and no cache outside a request answers for it
