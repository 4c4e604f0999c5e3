"""The Weaviate backend without a server: mapping, naming, the query it sends, re-scoring, and the fallback.

Requests are built with the weaviate client's own gRPC request builder, so the tests see exactly what a
server would receive. The server-backed behaviour runs in the contract suite where WEAVIATE_URL is set.
"""

import socket
import threading
import uuid

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from weaviate.proto.v1 import base_pb2
from weaviate.util import _ServerVersion

from search.backends import SearchRequest, backend_get
from search.backends.base import IndexedTool
from search.backends.weaviate import (
    EVENT_BACKEND_UNAVAILABLE,
    FIELD_PROPERTY,
    NEGATIVES_VECTOR,
    TOOL_VECTOR,
    PoolHit,
    WeaviateBackend,
    alias_name,
    collection_name,
    collection_properties,
    connection_settings,
    is_generation_collection,
    parse_explain,
    query_arguments,
    query_properties,
    rank_pool,
    tool_properties,
    tool_uuid,
    tool_vectors,
)
from search.documents import ToolDoc
from search.engine.ranking import Confidence
from search.engine.snapshot import DocVectors
from search.events import counters
from search.indexes import ToolSearchIndex
from search.services import index_rebuild, tool_search

from .factories import ToolFactory

DOC = ToolDoc(
    pk=7,
    tool_id="mail::send_email",
    name="send_email",
    server="mail",
    server_name="Mail",
    description="Send an email message. Supports attachments.",
    parameters=("to (string, required): recipient",),
    examples=("email my boss the report",),
    negatives=("read my inbox",),
)


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


# -- mapping and naming ----------------------------------------------------------------------------------


def test_properties_carry_identity_and_every_searchable_field():
    properties = tool_properties(DOC, ("document", "summary", "example"), ("doc", "sum", "email my boss the report"))
    assert properties["tool_pk"] == 7 and properties["tool_id"] == "mail::send_email"
    assert properties["server"] == "mail"  # the filterable slug
    assert properties["server_label"] == "mail Mail"  # the searchable label
    assert properties["name_split"] == "send email"
    assert properties["examples"] == "email my boss the report"
    assert properties["summary"] == "Send an email message."
    assert properties["vector_kinds"] == ["document", "summary", "example"]
    assert set(FIELD_PROPERTY.values()) <= set(properties)


def test_schema_declares_every_stored_property():
    declared = {p.name: p for p in collection_properties()}
    assert set(tool_properties(DOC)) == set(declared)
    assert declared["tool_pk"].indexFilterable is True
    assert declared["vector_texts"].indexSearchable is False  # explanations only, never matched


def test_query_properties_use_the_field_weights():
    weights = ToolSearchIndex.weights()
    props = query_properties()
    assert "name^3" in props and "examples^2" in props and "description" in props
    assert "server_label" in props  # the label is searched, the slug is not
    assert len(props) == len([w for w in weights.values() if w > 0])


def test_generation_collections_and_alias_names():
    token = str(uuid.uuid4())
    name = collection_name("ScoutTools", token)
    assert name == "ScoutTools_" + uuid.UUID(token).hex
    assert is_generation_collection("ScoutTools", name)
    assert not is_generation_collection("ScoutTools", "ScoutTools")
    assert not is_generation_collection("ScoutTools", "OtherTools_abc")
    assert alias_name("ScoutTools") == "ScoutTools"
    with pytest.raises(ImproperlyConfigured):
        alias_name("scout-tools")


def test_object_ids_are_stable_per_tool():
    assert tool_uuid(7) == tool_uuid(7)
    assert tool_uuid(7) != tool_uuid(8)


def test_all_vectors_of_a_tool_go_into_one_multi_vector():
    vectors = DocVectors(np.eye(3, 4, dtype=np.float32), ("document", "summary", "example"), ("a", "b", "c"))
    named = tool_vectors(IndexedTool(DOC, vectors))
    assert list(named) == [TOOL_VECTOR]
    assert np.asarray(named[TOOL_VECTOR]).shape == (3, 4)
    with_negatives = DocVectors(vectors.vectors, vectors.kinds, vectors.texts, np.ones((1, 4), np.float32))
    assert np.asarray(tool_vectors(IndexedTool(DOC, with_negatives))[NEGATIVES_VECTOR]).shape == (1, 4)
    assert tool_vectors(IndexedTool(DOC, None)) is None  # BM25 still finds a tool without vectors


@override_settings(WEAVIATE_URL="https://weaviate.example:8443", WEAVIATE_GRPC_URL="")
def test_connection_settings_from_the_url():
    assert connection_settings() == {
        "http_host": "weaviate.example",
        "http_port": 8443,
        "http_secure": True,
        "grpc_host": "weaviate.example",
        "grpc_port": 50051,
        "grpc_secure": True,
    }


@override_settings(WEAVIATE_URL="")
def test_missing_url_is_a_configuration_error():
    with pytest.raises(ImproperlyConfigured, match="WEAVIATE_URL"):
        connection_settings()


# -- the query sent to Weaviate --------------------------------------------------------------------------


class Sent(Exception):
    """Raised by the recording transport with the gRPC request the client was about to send."""


@pytest.fixture
def sent_request():
    """sent_request(request) -> the SearchRequest protobuf the backend's query would put on the wire.

    A real, unconnected weaviate client whose gRPC send is replaced by a recorder: everything above the
    network (our arguments, the client's validation and request building) runs for real."""
    import weaviate
    from weaviate.connect.base import ConnectionParams

    client = weaviate.WeaviateClient(
        connection_params=ConnectionParams.from_params(
            http_host="127.0.0.1", http_port=1, http_secure=False, grpc_host="127.0.0.1", grpc_port=2, grpc_secure=False
        ),
        skip_init_checks=True,
    )
    client._connection._weaviate_version = _ServerVersion(1, 32, 0)

    def record(request, *args, **kwargs):
        raise Sent(request)

    client._connection.grpc_search = record
    backend = WeaviateBackend()
    backend._client = client

    def capture(request: SearchRequest):
        with pytest.raises(Sent) as sent:
            backend._query(request)
        return sent.value.args[0]

    yield capture
    client.close()


def test_hybrid_query_carries_the_visibility_filter_inside(sent_request):
    request = SearchRequest(
        query="send mail", visible={5, 3, 9}, top_k=5, fusion="convex", query_vector=unit(1, 2, 3, 4)
    )
    assert query_arguments(request)[0] == "hybrid"
    sent = sent_request(request)
    assert sent.filters.target.property == "tool_pk"
    assert sent.filters.operator == base_pb2.Filters.OPERATOR_CONTAINS_ANY
    assert list(sent.filters.value_int_array.values) == [3, 5, 9]
    assert sent.hybrid_search.vectors[0].type == base_pb2.Vectors.VECTOR_TYPE_MULTI_FP32
    assert list(sent.hybrid_search.targets.target_vectors) == [TOOL_VECTOR]
    assert sent.hybrid_search.alpha == pytest.approx(0.7)
    assert sent.hybrid_search.fusion_type == sent.hybrid_search.FUSION_TYPE_RELATIVE_SCORE
    assert sent.limit >= 30  # the second stage's pool, not top_k: no short pages after re-scoring
    assert list(sent.metadata.vectors) == [TOOL_VECTOR, NEGATIVES_VECTOR]  # for exact cosines and negatives
    assert sent.metadata.score and sent.metadata.explain_score


def test_rrf_fusion_maps_to_weaviates_ranked_fusion(sent_request):
    request = SearchRequest(query="send mail", visible={1}, top_k=5, fusion="rrf", query_vector=unit(1, 0, 0, 0))
    sent = sent_request(request)
    assert sent.hybrid_search.fusion_type == sent.hybrid_search.FUSION_TYPE_RANKED


def test_without_a_query_vector_it_is_bm25_with_the_same_filter(sent_request):
    request = SearchRequest(query="send mail", visible=[4], top_k=5, fusion="convex", query_vector=None)
    assert query_arguments(request)[0] == "bm25"
    sent = sent_request(request)
    assert list(sent.filters.value_int_array.values) == [4]
    assert sent.bm25_search.query == "send mail"


def test_an_empty_visible_set_never_queries():
    request = SearchRequest(query="send mail", visible=set(), top_k=5, fusion="convex", query_vector=None)
    with pytest.raises(ValueError):
        query_arguments(request)


# -- re-scoring the pool ---------------------------------------------------------------------------------


def hit(pk: int, name: str, description: str, vectors, negatives=None, score: float = 0.5, keyword=None) -> PoolHit:
    doc = ToolDoc(pk=pk, tool_id=f"s::{name}", name=name, server="s", description=description)
    kinds = ("document",) * len(vectors)
    return PoolHit(
        properties=tool_properties(doc, kinds, ("text",) * len(vectors)),
        score=score,
        vectors=np.asarray(vectors, np.float32),
        negatives=None if negatives is None else np.asarray(negatives, np.float32),
        explain={} if keyword is None else {"keyword": keyword},
    )


def test_parse_explain_reads_each_branch_score():
    text = (
        "(Result Set keyword,bm25) Document 1f: original score 2.5, normalized score: 1 - "
        "(Result Set vector,hybridVector) Document 1f: original score 0.81, normalized score: 0.7"
    )
    assert parse_explain(text) == {"keyword": 2.5, "vector": 0.81}
    server_format = (  # as Weaviate 1.24+ prints it (weaviate/weaviate#4735)
        "Hybrid (Result Set vector) Document 2d628e6a-565c-47b3-8e8a-6c0924358ec0: original score 0.3755169, "
        "normalized score: 0.35678205 - \nHybrid (Result Set keyword) Document "
        "2d628e6a-565c-47b3-8e8a-6c0924358ec0: original score 6.4637876, normalized score: 0.4792187"
    )
    assert parse_explain(server_format) == {"vector": pytest.approx(0.3755169), "keyword": pytest.approx(6.4637876)}
    assert parse_explain(None) == {}
    assert parse_explain("something else") == {}


def test_pool_is_reranked_by_best_vector_and_terms():
    query_vector = unit(1, 0, 0)
    hits = [
        hit(1, "get_weather", "Weather for a city.", [unit(0, 1, 0)], score=0.9, keyword=3.0),
        hit(2, "send_email", "Send an email message.", [unit(0, 0, 1), unit(1, 0.05, 0)], score=0.8, keyword=1.0),
    ]
    candidates, confidence, cut, terms = rank_pool(
        hits, query="send an email", query_vector=query_vector, top_k=5, fusion="convex"
    )
    assert confidence is not Confidence.NONE and cut >= 1
    top = candidates[0]
    assert hits[top.row].properties["tool_id"] == "s::send_email"
    assert top.dense_rank == 1 and top.best_vector == 1  # its second vector is the close one
    assert top.bm25_rank == 2  # Weaviate's keyword score ranked it second
    assert terms == ("send", "email")


def test_a_close_negative_example_demotes_the_tool():
    query_vector = unit(1, 0, 0)
    hits = [
        hit(1, "read_inbox", "Read the newest mail.", [unit(1, 0.3, 0)], negatives=[unit(1, 0.01, 0)], score=0.9),
        hit(2, "list_mail", "List messages in a folder.", [unit(1, 0.5, 0)], score=0.5),
    ]
    candidates, _, _, _ = rank_pool(hits, query="read mail", query_vector=query_vector, top_k=5, fusion="convex")
    assert [hits[c.row].properties["tool_id"] for c in candidates] == ["s::list_mail", "s::read_inbox"]
    assert candidates[1].demoted


def test_nothing_relevant_abstains():
    hits = [hit(1, "get_weather", "Weather for a city.", [unit(0, 1, 0)], score=0.2)]
    _, confidence, cut, _ = rank_pool(
        hits, query="zzqx frobnicate", query_vector=unit(1, 0, 0), top_k=5, fusion="convex"
    )
    assert confidence is Confidence.NONE and cut == 0


# -- degrade, never fail (F5) ----------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def silent_server():
    """A TCP server that accepts connections and never answers: a hung Weaviate."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    server.close()


@pytest.fixture
def indexed_with_hidden(small_catalog, reindex, encoder):
    """The small catalog indexed by the default (embedded) backend, plus a hidden perfect match."""
    hidden = ToolFactory(
        server=small_catalog["send_email"].server, name="send_email_now", description="Send an email message now."
    )
    reindex(index_rebuild)
    visible = {t.pk for t in small_catalog.values()}
    return small_catalog, hidden, visible


def _degraded_search(visible: set[int]):
    return tool_search(query="send an email message", visible=visible, top_k=5)


@pytest.mark.django_db
@pytest.mark.slow
def test_unreachable_weaviate_gives_degraded_filtered_bm25(indexed_with_hidden):
    tools, hidden, visible = indexed_with_hidden
    with override_settings(SCOUT_SEARCH_BACKEND="weaviate", WEAVIATE_URL=f"http://127.0.0.1:{closed_port()}"):
        result = _degraded_search(visible)
        assert result.index_ready and result.degraded
        assert result.backend == "embedded"
        assert result.matches and result.matches[0].tool_id == "mail::send_email"
        assert hidden.pk not in {m.tool_pk for m in result.matches}  # never unfiltered
        assert {m.tool_pk for m in result.matches} <= visible
        assert counters.get(EVENT_BACKEND_UNAVAILABLE, 0) >= 1
        # The next search skips the dead server at once instead of reconnecting.
        unavailable_before_retry = counters.get(EVENT_BACKEND_UNAVAILABLE, 0)
        again = _degraded_search(visible)
        assert again.degraded and [m.tool_id for m in again.matches] == [m.tool_id for m in result.matches]
        assert counters.get(EVENT_BACKEND_UNAVAILABLE, 0) == unavailable_before_retry  # no reconnect attempt


@pytest.mark.django_db
@pytest.mark.slow
def test_hung_weaviate_gives_degraded_results_within_the_timeout(indexed_with_hidden, silent_server):
    _, hidden, visible = indexed_with_hidden
    url = f"http://127.0.0.1:{silent_server}"
    with override_settings(SCOUT_SEARCH_BACKEND="weaviate", WEAVIATE_URL=url):
        result = _degraded_search(visible)
    assert result.degraded and result.matches
    assert hidden.pk not in {m.tool_pk for m in result.matches}
    # F5: the server never answers, so getting an answer at all proves the connect check gave up and
    # embedded BM25 answered (latency is measured by the bench, not asserted here).
    assert result.backend == "embedded" and result.matches[0].tool_id == "mail::send_email"


@pytest.mark.django_db
def test_publish_to_unreachable_weaviate_raises_a_clear_error(small_catalog):
    from search.backends.weaviate import WeaviateUnavailable

    with override_settings(SCOUT_SEARCH_BACKEND="weaviate", WEAVIATE_URL=f"http://127.0.0.1:{closed_port()}"):
        backend = backend_get("weaviate")
        with pytest.raises(WeaviateUnavailable, match="cannot connect to Weaviate"):
            backend.publish(generation=str(uuid.uuid4()), tools=[], removed=(), full=True)
