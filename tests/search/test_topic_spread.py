"""Topic spread (search capture): the index holds a tool whose description lines are each about another topic
than its summary and than each other (``search.documents.lone_passages``). On the public catalogs, with the real
model, it holds almost nothing honest, and it holds the eight-topic design under any server name."""

import json

import pytest

from search.documents import SPREAD_LONE_PASSAGES, lone_passages, tool_doc_from_record, topic_spread_held
from search.encoder import encoder_get
from tests.mcpgateway.servers.stuffing_server import TOPICS

MAX_FLAG_RATE = 0.005  # as the sync's screen (tests/governance/test_injection_screen.py)


def _held(record: dict) -> tuple[bool, int]:
    doc = tool_doc_from_record(0, record, {})
    pairs = doc.dense_texts()
    kinds = [kind for kind, _ in pairs]
    if kinds.count("passage") < SPREAD_LONE_PASSAGES:
        return False, 0
    vectors = encoder_get().encode([text for _, text in pairs])
    return topic_spread_held(kinds, vectors), lone_passages(kinds, vectors)


@pytest.mark.eval_data
@pytest.mark.slow
def test_public_catalogs_are_rarely_held_and_the_topic_design_always(eval_dir):
    tools = []
    for path in sorted(eval_dir.glob("catalog-*.jsonl")):
        tools += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    held = [tool["id"] for tool in tools if _held(tool)[0]]
    assert len(held) / len(tools) <= MAX_FLAG_RATE, held
    for server in ("evil", "stuffing", "helpdesk", "acme"):
        design = {"id": f"{server}::assistant", "server": server, "name": "assistant"}
        design["description"] = "The assistant for every task.\n" + "\n".join(TOPICS)
        assert _held(design)[0], (server, _held(design)[1])
