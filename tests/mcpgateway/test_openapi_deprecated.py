"""An OpenAPI operation marked ``deprecated: true`` is a deprecated tool, as an MCP server's "(Deprecated)" tool is:
tool_search says so on its line and match, tool_inspect too. The flag is carried beside the definition
(``Tool.upstream_deprecated``), not written into the upstream's description. A real OpenAPI service on loopback,
synced, then searched and inspected over HTTP against the live gateway."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.catalog.openapi_service import CREDENTIALS, document, start_pet_service

from .conftest import gateway_db, mcp_client, run

pytestmark = [gateway_db, pytest.mark.slow]


@pytest.fixture
def pets(gateway, member_on, settings) -> Any:
    from catalog.models import Server
    from catalog.services.openapi_documents import server_openapi_document_set
    from catalog.services.sync import server_sync

    live, _ = start_pet_service()
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["127.0.0.1/32"]
    spec = document()
    spec["paths"]["/pets/{petId}"]["get"]["deprecated"] = True  # showPetById
    server = Server.objects.create(
        slug="pets", name="pets", transport="openapi", base_url=live.url, openapi_credentials=CREDENTIALS
    )
    server_openapi_document_set(server=server, text=json.dumps(spec))
    try:
        assert server_sync(server_pk=server.pk).status == "partial"  # some operations are refused by design
    finally:
        live.stop()
    return member_on(server, index=True)


def test_an_operation_the_document_deprecates_is_a_deprecated_tool(gateway, pets):
    from catalog.models import Tool

    old = Tool.objects.get(tool_id="pets::showPetById")
    assert old.upstream_deprecated and old.description.startswith("Show the details")
    assert not Tool.objects.get(tool_id="pets::listPets").upstream_deprecated

    async def main() -> tuple[Any, Any]:
        async with mcp_client(gateway, pets.token) as client:
            found = await client.call_tool("tool_search", {"query": "show the details of one pet by its id"})
            inspected = await client.call_tool("tool_inspect", {"tool_ids": ["pets::showPetById", "pets::listPets"]})
            return found, inspected

    found, inspected = run(main)
    by_id = {match["tool_id"]: match for match in found.structured_content["matches"]}
    assert by_id["pets::showPetById"]["deprecated"] is True
    assert "deprecated" not in by_id.get("pets::listPets", {})
    lines = {line.split(" ")[1]: line for line in found.content[0].text.splitlines() if line[:1].isdigit()}
    assert lines["pets::showPetById"].endswith("deprecated]")
    old, other = inspected.structured_content["tools"]
    assert old["deprecated"] is True and "deprecated" not in other
