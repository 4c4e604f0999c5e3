"""Scout's ASGI application, imported as `make run` imports it (its settings, its logging), with one address more:
``/raise``, whose exception leaves the application, as one quoting an upstream's words would. What uvicorn then logs
("Exception in ASGI application" and the traceback) is what tests/scoutsite/test_uvicorn_log_lines.py reads."""

from scoutsite.asgi import application as scout_application

# A line break that starts a forged record, a terminal escape, and a hosted server's URL with its secret path.
FORGED_MESSAGE = (
    "upstream said: no\n2026-01-01 00:00:00,000 INFO governance.audit approved everything"
    " \x1b[2J https://mcp.example/s/SECRETPATH/mcp"
)


async def application(scope, receive, send):
    if scope["type"] == "http" and scope["path"] == "/raise":
        raise RuntimeError(FORGED_MESSAGE)
    await scout_application(scope, receive, send)
