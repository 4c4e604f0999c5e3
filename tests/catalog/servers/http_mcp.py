"""A real Streamable HTTP MCP server (the SDK's MCPServer under uvicorn) on a free 127.0.0.1 port.

It runs in a background thread of the test process, so a test changes its tool set directly between
syncs (``upstream.mcp.add_tool`` / ``remove_tool``). The ``bump`` tool changes the tool set itself and
announces it with tools/list_changed, as a real server would.
"""

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import uvicorn
from mcp.server.mcpserver import Context, MCPServer


def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


def greet_v2(name: str, loud: bool = False) -> str:
    """Greet someone by name."""
    return f"HELLO, {name.upper()}!" if loud else f"Hello, {name}!"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def build_server() -> MCPServer:
    server = MCPServer("scout-test-http")
    server.add_tool(greet, name="greet")
    server.add_tool(add, name="add")

    async def bump(ctx: Context) -> str:
        """Add one more tool and announce that the tool list changed."""
        count = len(await server.list_tools())
        server.add_tool(add, name=f"add_{count}")
        await ctx.notify_tools_changed()
        return f"now {count + 1} tools"

    server.add_tool(bump, name="bump")
    return server


@dataclass
class RunningServer:
    mcp: MCPServer
    url: str


@contextmanager
def serve_http(server: MCPServer | None = None, **app_options: Any) -> Iterator[RunningServer]:
    """Serve ``server`` (a fresh ``build_server()`` by default) until the block ends (``app_options`` go to its
    ``streamable_http_app``)."""
    mcp = server or build_server()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(mcp.streamable_http_app(**app_options), log_level="warning", lifespan="on")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # a loaded machine starts it slowly
    while not uv.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test MCP server did not start")
        time.sleep(0.02)
    try:
        yield RunningServer(mcp=mcp, url=f"http://127.0.0.1:{port}/mcp")
    finally:
        uv.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextmanager
def silent_listener() -> Iterator[str]:
    """A TCP port that accepts connections and never answers: a hanging HTTP server."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        sock.close()


def refused_url() -> str:
    """A URL on a port nothing listens on (bound then closed, so the connection is refused)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}/mcp"


class Front(BaseHTTPRequestHandler):
    """A front before a real server (``real_url``, set by a subclass): what the subclass does not answer itself it
    hands on with ``forward``."""

    real_url = ""

    def forward(self, body: bytes | None) -> None:
        passed = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
        answer = httpx.request(self.command, self.real_url, content=body, headers=passed, timeout=30, trust_env=False)
        self.send_response(answer.status_code)
        for name, value in answer.headers.items():
            if name.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)

    def log_message(self, *args):
        pass


class SessionFront(Front):
    """A front that speaks 2025-11-25 (it answers ``server/discover`` as unknown: sessions, a session's event stream,
    resumable call streams) and hands the rest on; a subclass answers what it chooses with ``answer``."""

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        message = json.loads(body)
        if message.get("method") == "server/discover":
            unknown = {"code": -32601, "message": "Method not found"}
            self.answer("application/json", json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": unknown}))
        elif not self.answered(message):
            self.forward(body)

    def answered(self, message: dict) -> bool:
        """Answer ``message`` (a POSTed JSON-RPC message) here and say so; False hands it to the real server."""
        return False

    def do_DELETE(self):  # noqa: N802
        self.forward(None)

    def empty(self, status: int) -> None:
        """Answer ``status`` with no body (a 503, a 405 for a GET where there is no standalone event stream)."""
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def answer(self, content_type: str, text: str) -> None:
        body = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def serve_front(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a local port until the block ends; yields its /mcp URL."""
    front = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=front.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{front.server_address[1]}/mcp"
    finally:
        front.shutdown()
        front.server_close()


@contextmanager
def serve_forward_proxy() -> Iterator[tuple[str, list[str]]]:
    """A plain HTTP forward proxy on a local port (what HTTP(S)_PROXY names): it notes each request it is asked to pass
    on ("METHOD url"; CONNECT refused) and passes it on. Yields its URL and the notes."""
    seen: list[str] = []

    class Proxy(Front):
        def handle_one(self) -> None:
            seen.append(f"{self.command} {self.path}")
            if self.command == "CONNECT":
                self.send_error(502)
                return
            self.real_url = self.path  # a forward proxy is asked for the absolute URL
            self.forward(self.rfile.read(int(self.headers.get("Content-Length", 0))) or None)

        do_GET = do_POST = do_DELETE = do_CONNECT = handle_one  # noqa: N815 - http.server's names

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{proxy.server_address[1]}", seen
    finally:
        proxy.shutdown()
        proxy.server_close()
