"""Credentials for an OpenAPI service, read from the environment variables the server names, at call time.

Values are never stored, logged or put in an error message: a missing variable is named, never a value.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from catalog.upstream import UpstreamError

if TYPE_CHECKING:
    from catalog.models import Server


@dataclass
class CredentialParts:
    headers: dict[str, str] = field(default_factory=dict)
    query: list[tuple[str, str]] = field(default_factory=list)
    cookies: dict[str, str] = field(default_factory=dict)


def _env(server: Server, name: str) -> str:
    value = os.environ.get(name)
    if value is None:
        raise UpstreamError(f"{server.slug}: environment variable for credentials not set: {name}", kind="config")
    return value


def credentials_for(server: Server) -> CredentialParts:
    """Where each configured credential goes. Raises UpstreamError (kind "config") for a missing variable."""
    parts = CredentialParts()
    for credential in server.openapi_credentials or []:
        kind = credential.get("type")
        if kind == "bearer":
            parts.headers["Authorization"] = f"Bearer {_env(server, credential['env'])}"
        elif kind == "basic":
            pair = f"{_env(server, credential['username_env'])}:{_env(server, credential['password_env'])}"
            parts.headers["Authorization"] = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
        elif kind == "api_key":
            value = _env(server, credential["env"])
            if credential["in"] == "header":
                parts.headers[credential["name"]] = value
            elif credential["in"] == "query":
                parts.query.append((credential["name"], value))
            else:
                parts.cookies[credential["name"]] = value
    return parts


def cookie_header(cookies: dict[str, str]) -> str:
    return "; ".join(f"{name}={value}" for name, value in cookies.items())
