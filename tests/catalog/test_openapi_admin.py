"""The admin for OpenAPI servers: add one with an uploaded document, preview its operations, sync it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from catalog.models import OpenAPIDocument, Server, Tool

from .openapi_service import KEY_ENV, TOKEN_ENV, PetService, document, start_pet_service


@pytest.fixture(scope="module")
def pet_service() -> Iterator[tuple[Any, PetService]]:
    server, service = start_pet_service()
    yield server, service
    server.stop()


@pytest.fixture
def admin_client(client, superuser, settings, monkeypatch):
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["127.0.0.1/32"]
    monkeypatch.setenv(TOKEN_ENV, "admin-test-token")
    monkeypatch.setenv(KEY_ENV, "admin-test-key")
    client.force_login(superuser)
    return client


def _add(
    admin_client, base_url: str, upload: bytes | None, *, to: str = "admin:catalog_server_add", **extra: str
) -> Any:
    """Post the server form (to the add page or another of its buttons' views); ``upload`` None: no file."""
    file = {} if upload is None else {"openapi_upload": SimpleUploadedFile("petstore.json", upload, "application/json")}
    return admin_client.post(
        reverse(to),
        {
            "slug": "pets",
            "name": "Pet store",
            "environment": "production",
            "transport": "openapi",
            "args": "[]",
            "env_vars": "[]",
            "header_env": "{}",
            "base_url": base_url,
            **file,
            "openapi_document": "",
            "openapi_credentials": json.dumps([{"type": "bearer", "env": TOKEN_ENV}]),
            "status": "active",
            "sync_runs-TOTAL_FORMS": "0",
            "sync_runs-INITIAL_FORMS": "0",
            # The server form's access inlines (governance): no grant given here.
            **{
                f"{prefix}-{key}": "0"
                for prefix in ("group_grants", "user_grants")
                for key in ("TOTAL_FORMS", "INITIAL_FORMS")
            },
            **extra,
        },
    )


def test_add_with_an_uploaded_document_then_preview_saves_no_tool(admin_client, pet_service):
    live, service = pet_service
    response = _add(admin_client, live.url, json.dumps(document()).encode())
    assert response.status_code == 302, response.content.decode()[:3000]
    server = Server.objects.get(slug="pets")
    assert json.loads(server.openapi_spec.text)["info"]["title"] == "Petstore"

    change = admin_client.get(reverse("admin:catalog_server_change", args=[server.pk]))
    preview_url = reverse("admin:catalog_server_openapi_preview", args=[server.pk])
    assert preview_url in change.content.decode()

    page = admin_client.get(preview_url).content.decode()
    assert "10 tools would be imported" in page
    assert "<code>listPets</code>" in page and "<code>GET /pets</code>" in page
    assert "<code>put_pets_petId_owner</code>" in page and "<code>PUT /pets/{petId}/owner</code>" in page
    assert "2 operations refused" in page and "callbacks are not supported" in page
    assert not Tool.objects.filter(server=server).exists()
    assert service.calls() == []

    admin_client.post(reverse("admin:catalog_server_sync", args=[server.pk]))
    assert Tool.objects.filter(server=server, removed_at__isnull=True).count() == 10


def test_preview_shows_a_malformed_document_error(admin_client, pet_service):
    live, _ = pet_service
    server = Server.objects.create(slug="broken", name="Broken", transport="openapi", base_url=live.url)
    OpenAPIDocument.objects.create(server=server, text='{"openapi": "3.0.3"}')
    page = admin_client.get(reverse("admin:catalog_server_openapi_preview", args=[server.pk])).content.decode()
    assert "malformed OpenAPI document" in page and "required property" in page


def test_test_connection_lists_a_new_services_operations_and_saves_nothing(admin_client, pet_service):
    """The form's Test connection reads the document the form holds (uploaded, pasted or at its URL), as a sync
    would; it answered 500 for every OpenAPI service."""
    live, service = pet_service
    test = "admin:catalog_server_test_connection"
    uploaded = _add(admin_client, live.url, json.dumps(document()).encode(), to=test)
    pasted = _add(admin_client, live.url, None, to=test, openapi_document=json.dumps(document()))
    fetched = _add(admin_client, live.url, None, to=test, openapi_url=f"{live.url}/openapi.json")
    for response in (uploaded, pasted, fetched):
        page = response.content.decode()
        assert response.status_code == 200 and "pets::listPets" in page and "pets::createPet" in page, page[-3000:]
        assert 'id="test-connection-refused"' in page and "subscribe" in page  # callbacks: refused, and said why
    assert service.requests[-1].raw_path == "/openapi.json"
    garbage = _add(admin_client, live.url, None, to=test, openapi_document="hello: [1, 2")
    assert garbage.status_code == 200 and "malformed OpenAPI document" in garbage.content.decode()
    assert not Server.objects.exists() and not OpenAPIDocument.objects.exists()


def test_add_refuses_an_openapi_server_without_base_url(admin_client):
    response = _add(admin_client, "", json.dumps(document()).encode())
    assert response.status_code == 200
    assert "An OpenAPI server needs the base URL" in response.content.decode()
    assert not Server.objects.filter(slug="pets").exists()


def test_add_needs_exactly_one_of_document_url_and_document(admin_client, pet_service):
    live, _ = pet_service
    both = _add(admin_client, live.url, b"{}", openapi_url=f"{live.url}/openapi.json")
    assert "Give either the document" in both.content.decode()
    neither = _add(admin_client, live.url, b"")
    assert "Give either the document" in neither.content.decode()
    assert not Server.objects.filter(slug="pets").exists()


def test_preview_needs_change_permission(client, member, pet_service):
    live, _ = pet_service
    server = Server.objects.create(slug="p2", name="P2", transport="openapi", base_url=live.url)
    OpenAPIDocument.objects.create(server=server, text=json.dumps(document()))
    member.is_staff = True
    member.save()
    client.force_login(member)
    assert client.get(reverse("admin:catalog_server_openapi_preview", args=[server.pk])).status_code == 403
