"""ASGI entry point. The MCP endpoint is mounted beside Django here by the gateway issue."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")

application = get_asgi_application()
