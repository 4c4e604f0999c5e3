"""The secrets Scout hands an upstream server, and text with them taken out (T1, T9, T14).

A server gets values from Scout's environment: a stdio server the variables it names (``env_vars``), a Streamable
HTTP server its headers (``header_env``), an OpenAPI service its credentials. An upstream may say them back: a
stdio server's stderr or error naming its token, a service's error page quoting the request it refused. What it
says reaches operators (sync errors, the admin, logs) and callers (a tool's result, which the model reads and an
idempotency key stores): there each value is replaced by ``REDACTED``, as sent and as the server got it (a bearer
token alone, a basic credential's base64 pair, a query key percent-encoded). Values shorter than
``MIN_SECRET_CHARS`` are left (a port, a flag: replacing them everywhere would garble output, and they guard
nothing). ORM-free: reads a Server's fields only.
"""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, quote_plus

if TYPE_CHECKING:
    from catalog.models import Server

MIN_SECRET_CHARS = 8
REDACTED = "[redacted]"
CREDENTIAL_ENV_KEYS = ("env", "username_env", "password_env")


def _env(name: object) -> str:
    return os.environ.get(name, "") if isinstance(name, str) else ""


def server_secrets(server: Server) -> tuple[str, ...]:
    """Every value ``server`` is given from the environment, in each form it travels, longest first (so a header's
    value is replaced whole before the token inside it)."""
    values: set[str] = set()
    for name in [*(server.env_vars or []), *(server.header_env or {}).values()]:
        value = _env(name)
        values.add(value)
        values.add(value.partition(" ")[2])  # "Bearer <token>": the token alone
    for credential in server.openapi_credentials or []:
        if not isinstance(credential, dict):
            continue
        for key in CREDENTIAL_ENV_KEYS:
            value = _env(credential.get(key))
            values.update((value, quote(value, safe=""), quote_plus(value)))
        if credential.get("type") == "basic":
            pair = f"{_env(credential.get('username_env'))}:{_env(credential.get('password_env'))}"
            values.add(base64.b64encode(pair.encode("utf-8")).decode("ascii"))
    return tuple(sorted((v for v in values if len(v) >= MIN_SECRET_CHARS), key=len, reverse=True))


def secrets_removed(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with each of ``secrets`` replaced by ``REDACTED``."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def json_secrets_removed(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` (parsed JSON) with ``secrets_removed`` applied to every string, object keys included. A walk
    without recursion: a document holds JSON nested deeper than Python's call stack (an OpenAPI extension)."""
    if not secrets:
        return value

    def cleaned(item: Any) -> Any:  # a string cleaned, a container as a new empty one (filled by the walk)
        if isinstance(item, str):
            return secrets_removed(item, secrets)
        if isinstance(item, dict):
            return {}
        if isinstance(item, list):
            return []
        return item

    root = cleaned(value)
    stack: list[tuple[Any, Any]] = [(value, root)] if isinstance(root, dict | list) else []
    while stack:
        source, target = stack.pop()
        pairs = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in pairs:
            copy = cleaned(item)
            if isinstance(target, dict):
                target[cleaned(key)] = copy
            else:
                target.append(copy)
            if isinstance(copy, dict | list):
                stack.append((item, copy))
    return root
