"""The site root: a small landing page with each role's way in and the MCP endpoint to give a client."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from governance.roles import ROLE_SUMMARIES


def landing_view(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "scout/landing.html",
        {"mcp_url": f"{settings.SCOUT_PUBLIC_URL}/mcp", "roles": ROLE_SUMMARIES},
    )
