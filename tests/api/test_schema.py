"""The OpenAPI schema: generated (no hand-written file), valid OpenAPI 3, every /api/v1/ route in it; docs
pages served with their assets from this server (no CDN)."""

import re

from openapi_spec_validator import validate

from tests.api.conftest import api_db, http

pytestmark = api_db

NOT_IN_SCHEMA = {"schema/", "docs/", "redoc/", "api-unknown"}


def api_routes() -> set[str]:
    """Every route under /api/v1/ as an OpenAPI path (``<path:tool_id>`` -> ``{tool_id}``)."""
    from django.urls import URLPattern, URLResolver, get_resolver

    routes: set[str] = set()

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                route = prefix + str(pattern.pattern)
                if route.startswith("api/v1/") and pattern.name not in NOT_IN_SCHEMA:
                    if route[len("api/v1/") :] not in NOT_IN_SCHEMA:
                        routes.add("/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route))

    walk(get_resolver().url_patterns, "")
    return routes


def test_schema_is_valid_and_complete(api):
    response = http("GET", f"{api.base}/api/v1/schema/", params={"format": "json"})
    assert response.status_code == 200
    schema = response.json()
    validate(schema)  # raises on an invalid OpenAPI document
    assert schema["openapi"].startswith("3.")
    routes = api_routes()
    assert len(routes) >= 20
    assert routes == set(schema["paths"])
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    # Every operation takes a bearer token (sessions work too): none is public.
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert {"bearerAuth": []} in operation["security"], (method, path)


def test_docs_pages_are_served_without_a_cdn(api):
    for page in ("docs/", "redoc/"):
        response = http("GET", f"{api.base}/api/v1/{page}")
        assert response.status_code == 200
        assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css))"', response.text)
        assert assets, page
        for asset in assets:
            assert asset.startswith("/static/drf_spectacular_sidecar/"), asset
            assert http("GET", f"{api.base}{asset}").status_code == 200, asset
