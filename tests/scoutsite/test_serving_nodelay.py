"""The run command's protocol turns Nagle off on every connection, including those accepted on the socket
uvicorn binds itself for ``--workers N`` (made with proto=0, where asyncio leaves Nagle on): with it on, each
answer's body waited for the client's delayed ACK, ~45 ms per request."""

from __future__ import annotations

import asyncio
import socket

import httpx
import uvicorn


async def _app(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


def _no_delay_of_open_connections(protocol: str) -> list[int]:
    async def scenario() -> list[int]:
        sock = socket.socket(family=socket.AF_INET)  # as uvicorn's Config.bind_socket makes it for --workers
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(_app, http=protocol, lifespan="off", log_level="warning")
        server = uvicorn.Server(config)
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"http://127.0.0.1:{port}/")).text == "ok"
            flags = [
                connection.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                for connection in server.server_state.connections
            ]
        server.should_exit = True
        await serving
        return flags

    return asyncio.run(scenario())


def test_connections_on_a_socket_uvicorn_binds_itself_have_nagle_off():
    flags = _no_delay_of_open_connections("scoutsite.serving:BoundedH11Protocol")
    assert flags and all(flags), flags


def test_stock_h11_leaves_nagle_on_there_which_is_why_the_protocol_sets_it():
    flags = _no_delay_of_open_connections("h11")
    assert flags and not any(flags), flags
