"""A small real REST service (Starlette) and its OpenAPI 3.0 document, for the OpenAPI sync and execution tests.

The service records every request it receives (method, raw path, query, headers, body), so tests can assert
what Scout sent, and that nothing was sent when a call must be refused before it leaves.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import gzip
import json
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

TOKEN_ENV = "PETSTORE_TOKEN"
KEY_ENV = "PETSTORE_QUERY_KEY"
CREDENTIALS = [
    {"type": "bearer", "env": TOKEN_ENV},
    {"type": "api_key", "in": "query", "name": "api_key", "env": KEY_ENV},
]

DOCUMENT: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "Petstore", "version": "1.0.0"},
    # Never followed: requests go to the server's base URL only.
    "servers": [{"url": "http://169.254.169.254/latest"}],
    "paths": {
        "/pets": {
            "get": {
                "operationId": "listPets",
                "summary": "List the pets in the store",
                "description": "List the pets for sale in the pet store, optionally filtered by adoption status.",
                "parameters": [
                    {"$ref": "#/components/parameters/Limit"},
                    {
                        "name": "status",
                        "in": "query",
                        "description": "Adoption status",
                        "schema": {"type": "string", "enum": ["available", "pending", "sold"]},
                    },
                    {"name": "tags", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
                    {"name": "X-Request-Id", "in": "header", "schema": {"type": "string"}},
                ],
                "responses": {"200": {"description": "A list of pets"}},
            },
            "post": {
                "operationId": "createPet",
                "summary": "Add a pet to the store",
                "requestBody": {"$ref": "#/components/requestBodies/NewPetBody"},
                "responses": {"201": {"description": "Created"}},
            },
        },
        "/pets/{petId}": {
            "parameters": [
                {
                    "name": "petId",
                    "in": "path",
                    "required": True,
                    "description": "The pet's id",
                    "schema": {"type": "string"},
                }
            ],
            "get": {
                "operationId": "showPetById",
                "summary": "Show one pet",
                "description": "Show the details of one pet by its id.",
                "responses": {"200": {"description": "The pet"}, "404": {"description": "No such pet"}},
            },
            "delete": {
                "operationId": "deletePet",
                "summary": "Delete a pet",
                "description": "Remove a pet from the store for good.",
                "responses": {"204": {"description": "Deleted"}},
            },
        },
        "/pets/{petId}/owner": {
            "put": {
                "summary": "Set a pet's owner",
                "parameters": [
                    {"name": "petId", "in": "path", "required": True, "schema": {"type": "integer"}},
                    {"name": "X-Tenant", "in": "header", "required": True, "schema": {"type": "string"}},
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Owner"}}},
                },
                "responses": {"200": {"description": "Owner set"}},
            }
        },
        "/pets/{petId}/photo": {
            "post": {
                "operationId": "uploadPhoto",
                "summary": "Upload a photo of a pet",
                "parameters": [{"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}],
                "requestBody": {
                    "required": True,
                    "content": {"multipart/form-data": {"schema": {"type": "object"}}},
                },
                "responses": {"200": {"description": "Uploaded"}},
            }
        },
        "/subscriptions": {
            "post": {
                "operationId": "subscribe",
                "summary": "Subscribe to pet events",
                "requestBody": {
                    "content": {
                        "application/json": {"schema": {"type": "object", "properties": {"url": {"type": "string"}}}}
                    }
                },
                "callbacks": {
                    "onEvent": {"{$request.body#/url}": {"post": {"responses": {"200": {"description": "ok"}}}}}
                },
                "responses": {"201": {"description": "Subscribed"}},
            }
        },
        "/categories": {
            "post": {
                "operationId": "createCategory",
                "summary": "Create a category tree",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Category"}}},
                },
                "responses": {"201": {"description": "Created"}},
            }
        },
        "/slow": {
            "get": {
                "operationId": "slowReport",
                "summary": "A slow report",
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/big": {
            "get": {
                "operationId": "bigExport",
                "summary": "Export everything",
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/boom": {
            "get": {
                "operationId": "brokenReport",
                "summary": "Always fails",
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/moved": {
            "get": {"operationId": "movedReport", "summary": "Moved away", "responses": {"200": {"description": "ok"}}}
        },
    },
    "components": {
        "parameters": {
            "Limit": {
                "name": "limit",
                "in": "query",
                "description": "How many pets to return at most",
                "schema": {"type": "integer", "minimum": 1, "maximum": 100},
            }
        },
        "requestBodies": {
            "NewPetBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewPet"}}},
            }
        },
        "schemas": {
            "PetBase": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "id": {"type": "integer", "readOnly": True},
                    "name": {"type": "string", "description": "The pet's name"},
                    "species": {"type": "string", "enum": ["cat", "dog", "bird"]},
                },
            },
            "NewPet": {
                "allOf": [
                    {"$ref": "#/components/schemas/PetBase"},
                    {"type": "object", "properties": {"tag": {"type": "string", "nullable": True}}},
                ]
            },
            "Owner": {
                "type": "object",
                "required": ["email"],
                "properties": {"email": {"type": "string", "format": "email"}, "name": {"type": "string"}},
            },
            "Category": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/components/schemas/Category"}},
                },
            },
        },
    },
}


def document() -> dict[str, Any]:
    """A fresh copy of the document (tests change it)."""
    return copy.deepcopy(DOCUMENT)


@dataclass
class Recorded:
    method: str
    raw_path: str
    query: str
    headers: dict[str, str]
    body: bytes
    raw_headers: list[tuple[str, str]] = field(default_factory=list)  # every header as sent, repeats kept

    def json(self) -> Any:
        return json.loads(self.body)


BOMB_BYTES = 64 * 1024 * 1024


@functools.cache
def gzip_bomb() -> bytes:
    """64 MB of one byte, gzip-compressed to some 64 kB: about what a client receives in one read."""
    return gzip.compress(b"x" * BOMB_BYTES, compresslevel=9)


def _gzipped(body: bytes) -> Response:
    return Response(body, media_type="application/json", headers={"Content-Encoding": "gzip"})


@dataclass
class PetService:
    """The service's state: received requests, the expected bearer token, where /moved redirects to."""

    token: str = ""
    redirect_to: str = "http://127.0.0.1:9/elsewhere"
    requests: list[Recorded] = field(default_factory=list)
    served_document: dict[str, Any] = field(default_factory=document)
    big_as_gzip_bomb: bool = False  # /big answers with gzip_bomb()
    quote_request: bool = False  # /boom's error page quotes the request's credentials, as a debug page does
    pet_body: str = ""  # /pets/1 answers with this text as its JSON instead

    def calls(self, method: str | None = None, path_prefix: str = "/") -> list[Recorded]:
        return [
            r
            for r in self.requests
            if (method is None or r.method == method)
            and r.raw_path.startswith(path_prefix)
            and r.raw_path != "/openapi.json"
        ]

    def app(self) -> Starlette:
        async def record(request: Request) -> Response | None:
            self.requests.append(
                Recorded(
                    method=request.method,
                    raw_path=request.scope["raw_path"].decode("latin-1"),
                    query=request.scope["query_string"].decode("latin-1"),
                    headers={k.lower(): v for k, v in request.headers.items()},
                    body=await request.body(),
                    raw_headers=[(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in request.headers.raw],
                )
            )
            if request.url.path != "/openapi.json" and request.headers.get("authorization") != f"Bearer {self.token}":
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            return None

        async def pets(request: Request) -> Response:
            if denied := await record(request):
                return denied
            if request.method == "POST":
                return JSONResponse({"id": 7, **json.loads(await request.body())}, status_code=201)
            limit = int(request.query_params.get("limit", "10"))
            return JSONResponse([{"id": i, "name": f"pet {i}"} for i in range(1, limit + 1)])

        async def pet(request: Request) -> Response:
            if denied := await record(request):
                return denied
            if request.path_params["pet_id"] != "1":
                return JSONResponse({"error": f"no pet {request.path_params['pet_id']}"}, status_code=404)
            if request.method == "DELETE":
                return Response(status_code=204)
            if self.pet_body:
                return Response(self.pet_body, media_type="application/json")
            return JSONResponse({"id": 1, "name": "Rex", "species": "dog"})

        async def anything(request: Request) -> Response:
            if denied := await record(request):
                return denied
            path = request.url.path
            if path == "/slow":
                await asyncio.sleep(3)
                return JSONResponse({"done": True})
            if path == "/big":
                return _gzipped(gzip_bomb()) if self.big_as_gzip_bomb else PlainTextResponse("x" * 200_000)
            if path == "/bomb.json":
                return _gzipped(gzip_bomb())
            if path == "/gzipped.json":
                return _gzipped(gzip.compress(json.dumps(self.served_document).encode()))
            if path == "/boom":
                quoted = ""
                if self.quote_request:
                    quoted = f" (request: authorization={request.headers.get('authorization')}; {request.url.query})"
                return PlainTextResponse("internal failure: database is down" + quoted, status_code=500)
            if path == "/moved":
                return RedirectResponse(self.redirect_to, status_code=302)
            if path == "/drip.json":  # the document in 30 pieces, 0.1 s apart: every read is quick, the whole slow
                text = json.dumps(self.served_document).encode()
                size = len(text) // 30 + 1

                async def pieces():
                    for start in range(0, len(text), size):
                        yield text[start : start + size]
                        await asyncio.sleep(0.1)

                return StreamingResponse(pieces(), media_type="application/json")
            return JSONResponse({"ok": True, "path": path})

        async def openapi(request: Request) -> Response:
            await record(request)
            return JSONResponse(self.served_document)

        return Starlette(
            routes=[
                Route("/openapi.json", openapi),
                Route("/pets", pets, methods=["GET", "POST"]),
                Route("/pets/{pet_id:path}", pet, methods=["GET", "DELETE"]),
                Route("/{rest:path}", anything, methods=["GET", "POST", "PUT", "DELETE"]),
            ]
        )


def start_pet_service() -> tuple[Any, PetService]:
    """The service under uvicorn on a free loopback port (stop it with ``server.stop()``)."""
    from tests.mcpgateway.conftest import ThreadedUvicorn

    service = PetService()
    return ThreadedUvicorn(service.app()).start(), service
