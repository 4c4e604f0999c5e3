"""ASGI entry point: a small Starlette root with the MCP endpoint at /mcp and Django for everything else.

The Starlette lifespan runs the MCP SDK's session manager and the gateway's upstream pool, so uvicorn
(``make run``) serves both from one process.
"""

import logging
import os

from django.conf import settings as _settings
from django.core.asgi import get_asgi_application
from django.core.exceptions import ImproperlyConfigured

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
if not _settings.configured:  # this process serves: its connections get the lock/statement timeouts (F7)
    os.environ.setdefault("SCOUT_DB_SERVING", "1")

django_application = get_asgi_application()

from scoutsite.checks import scout_check_errors  # noqa: E402

if errors := scout_check_errors():  # a configuration that cannot work stops the start, saying why
    raise ImproperlyConfigured("\n".join(errors))

from scoutsite.tracing import tracing_configure  # noqa: E402

tracing_configure()  # off unless OTEL_* variables ask for it

# The admin is the product, so its CSS and JS are served here too (from the app directories, no
# collectstatic step), unless a front proxy serves STATIC_ROOT (SCOUT_SERVE_STATIC=0).
from django.conf import settings  # noqa: E402

if settings.SCOUT_SERVE_STATIC:
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_application = ASGIStaticFilesHandler(django_application)

# Imported after Django is set up: the gateway reads settings and models.
from contextlib import asynccontextmanager  # noqa: E402

from starlette.applications import Starlette  # noqa: E402
from starlette.routing import Mount  # noqa: E402

from mcpgateway.guards import TokenInAddressGuard  # noqa: E402
from mcpgateway.server import build_gateway_app, gateway_lifespan  # noqa: E402
from scoutsite.api.errors import error_body  # noqa: E402
from scoutsite.middleware import serving_connections_log  # noqa: E402

mcp_server, mcp_routes = build_gateway_app()


@asynccontextmanager
async def lifespan(app: Starlette):
    import anyio

    await anyio.to_thread.run_sync(serving_connections_log)  # the REST bound is per process: say what that means
    await anyio.to_thread.run_sync(_dead_sync_runs_close)
    async with gateway_lifespan(mcp_server):
        yield


def _dead_sync_runs_close() -> None:
    """Where syncs run in-process (no worker, so no beat to close them), those a previous run of this process left
    "running" when it stopped are closed as failed now: a page never closes them (mend3). A database not migrated
    yet or unreachable is the health checks' to report: this never stops a process from serving."""
    from django.db import connection

    from catalog.services.sync import sync_runs_dead_close
    from scoutsite.celery import app as celery_app

    if not celery_app.conf.task_always_eager:
        return  # the beat's (catalog.tasks.close_dead_sync_runs)
    try:
        sync_runs_dead_close()
    except Exception:  # noqa: BLE001 - see above
        logging.getLogger("scout.sync").warning("could not close dead sync runs at start", exc_info=True)
    finally:
        connection.close()  # this thread's, not kept open


# A token in any page's address is refused and kept out of the access log (TokenInAddressGuard).
application = TokenInAddressGuard(
    Starlette(routes=[*mcp_routes, Mount("/", app=django_application)], lifespan=lifespan), api_error=error_body
)
