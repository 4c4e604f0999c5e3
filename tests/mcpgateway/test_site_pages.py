"""The site as the demo serves it (DEBUG off unless a developer asks): the root and the admin's "View site"
lead to a landing page, unknown pages are plain 404s (no debug page), and the admin's static files are served."""

from __future__ import annotations

import re

import httpx
import pytest

from .conftest import gateway_db, make_user

pytestmark = [gateway_db, pytest.mark.slow]


def test_root_and_view_site_lead_to_the_admin_and_unknown_pages_are_plain_404s(gateway):
    make_user("curator", is_staff=True, is_superuser=True)
    with httpx.Client(base_url=gateway.url, timeout=30) as client:
        root = client.get("/")
        assert root.status_code == 200 and f"{gateway.url}/mcp" in root.text  # landing: roles and the MCP URL
        assert 'href="/admin/governance/approvalrequest/"' in root.text

        missing = client.get("/no-such-page/")
        assert missing.status_code == 404
        for debug_marker in ("Django tried these URL patterns", "DEBUG = True", "Traceback"):
            assert debug_marker not in missing.text

        client.get("/admin/login/")
        login = client.post(
            "/admin/login/",
            data={
                "username": "curator",
                "password": "pw-curator-123",
                "csrfmiddlewaretoken": client.cookies["csrftoken"],
                "next": "/admin/",
            },
        )
        assert login.status_code == 302
        index = client.get("/admin/")
        (view_site,) = re.findall(r'<a href="([^"]*)">View site</a>', index.text)
        landed = client.get(view_site, follow_redirects=True)
        assert landed.status_code == 200 and str(landed.url).rstrip("/") == gateway.url
        assert "Sign in to the admin" in landed.text
        assert "<title>Home | Scout admin</title>" in index.text

        assert client.get("/static/admin/css/base.css").status_code == 200
        assert client.get("/static/scout/admin.css").status_code == 200
