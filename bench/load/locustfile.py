"""Locust users for the load suite (run by run_load.py; see its docstring). Loopback only.

Agent (L1, L2): 80% tool_search with one of its own tools' descriptions, 20% execute_tool of one of its
tools (50 ms upstream). Every search answer is checked against the oracle, the agent's own grants (L2):
a tool id outside it counts as a leak. SlowCaller (L4): calls the 30 s upstream. Burst (L3): one token
sending REST searches as fast as it can; the rate limiter decides.
Counts that are not latencies (leaks, 429s) go to LOAD_SUMMARY (JSON) when the run ends.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import threading

from locust import HttpUser, between, constant, events, task

CONFIG = json.loads(open(os.environ["LOAD_CONFIG"], encoding="utf-8").read())
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "scout-load", "version": "1"},
}
_lock = threading.Lock()
COUNTS = {"leaked_ids": 0, "checked_responses": 0, "burst_accepted": 0, "burst_limited": 0, "burst_other": 0}
_agents = itertools.cycle(range(len(CONFIG["agents"])))


def _count(key: str, amount: int = 1) -> None:
    with _lock:
        COUNTS[key] += amount


@events.quitting.add_listener
def _write_summary(environment, **kwargs) -> None:
    path = os.environ.get("LOAD_SUMMARY")
    if path:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(COUNTS, handle)


def _mcp(user: HttpUser, token: str, meta_tool: str, arguments: dict, name: str) -> dict | None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": meta_tool, "arguments": arguments, "_meta": META},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": meta_tool,
    }
    with user.client.post("/mcp", json=body, headers=headers, name=name, catch_response=True) as response:
        if response.status_code != 200:
            response.failure(f"HTTP {response.status_code}")
            return None
        try:
            text = response.text
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                text = next(line[5:] for line in text.splitlines() if line.startswith("data:") and line[5:].strip())
            message = json.loads(text)
        except (ValueError, StopIteration):
            response.failure("unreadable answer")
            return None
        result = message.get("result")
        if result is None or (result.get("isError") and meta_tool == "execute_tool"):
            response.failure("error result")
            return None
        return result


class Agent(HttpUser):
    weight = 10
    wait_time = between(0.05, 0.2)

    def on_start(self) -> None:
        agent = CONFIG["agents"][next(_agents)]
        self.token, self.allowed, self.queries = agent["token"], set(agent["allowed"]), agent["queries"]

    @task(8)
    def search(self) -> None:
        result = _mcp(self, self.token, "tool_search", {"query": random.choice(self.queries)}, "L1 tool_search")
        if result is None:
            return
        found = {match["tool_id"] for match in (result.get("structuredContent") or {}).get("matches", [])}
        _count("checked_responses")
        leaked = found - self.allowed
        if leaked:
            _count("leaked_ids", len(leaked))

    @task(2)
    def execute(self) -> None:
        tool_id = random.choice(sorted(self.allowed))
        _mcp(self, self.token, "execute_tool", {"tool_id": tool_id, "arguments": {"region": "eu"}}, "L1 execute")


class SlowCaller(HttpUser):
    """L4: calls in flight on one 30 s upstream; the pool's per-server bulkhead must keep the others unchanged."""

    fixed_count = int(os.environ.get("LOAD_SLOW_CALLS", "20"))  # run_load.py names this class for L4 only
    wait_time = constant(0)

    @task
    def call_slow(self) -> None:
        slow = CONFIG["slow"]
        _mcp(self, slow["token"], "execute_tool", {"tool_id": slow["tool_id"], "arguments": {}}, "L4 slow execute")


class Burst(HttpUser):
    """L3: one token far above its rate limit; accepted requests must stay within the limit (+5%)."""

    fixed_count = 1
    wait_time = constant(0)

    @task
    def burst(self) -> None:
        burst = CONFIG["burst"]
        with self.client.post(
            "/api/v1/search/",
            json={"query": burst["query"]},
            headers={"Authorization": f"Bearer {burst['token']}"},
            name="L3 burst REST search",
            catch_response=True,
        ) as response:
            if response.status_code == 200:
                _count("burst_accepted")
                response.success()
            elif response.status_code == 429:
                _count("burst_limited")
                response.success()  # refusing is the expected answer above the limit
            else:
                _count("burst_other")
                response.failure(f"HTTP {response.status_code}")
