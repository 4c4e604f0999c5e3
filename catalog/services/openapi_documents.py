"""Stored OpenAPI documents (the alternative to a document URL)."""

from django.db import transaction

from catalog.models import OpenAPIDocument, Server


def server_openapi_document_set(*, server: Server, text: str) -> None:
    """Store ``text`` as ``server``'s OpenAPI document, or remove the stored one when ``text`` is blank.

    Takes effect at the next sync (a preview reads it at once); nothing is validated here, since a sync
    reports a malformed document as a failed run and keeps the catalog.
    """
    with transaction.atomic():
        if text.strip():
            OpenAPIDocument.objects.update_or_create(server=server, defaults={"text": text})
        else:
            OpenAPIDocument.objects.filter(server=server).delete()


def server_openapi_document_get(*, server: Server) -> str:
    """The stored document's text ('' when there is none)."""
    return OpenAPIDocument.objects.filter(server=server).values_list("text", flat=True).first() or ""
