"""An OpenAPI service's answer read under a bound on what it decompresses to (T13).

httpx decompresses each chunk it receives whole before the reader sees it: one 64 kB chunk of a gzip bomb is
some 64 MB in memory before any bound on the body can cut it. Here the raw bytes are decompressed as they
arrive, never more than the bound (plus one byte, to know it was passed) at a time.
"""

from __future__ import annotations

import zlib

import httpx

# What Scout asks for and reads: gzip and deflate (zlib, RFC 9110) only, decompressed here.
ACCEPTED_ENCODINGS = "gzip, deflate"
_WBITS = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}


async def body_read(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """``response``'s body decompressed, at most ``limit`` bytes, and whether there was more (the rest is never
    read nor decompressed). Raises httpx.DecodingError for an encoding other than gzip or deflate (a stacked one,
    ``gzip, gzip``, multiplies the bomb) or a corrupt body."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity", *_WBITS):
        raise httpx.DecodingError(f"the answer's Content-Encoding is {encoding[:40]!r}, not gzip or deflate")
    decompressor = zlib.decompressobj(_WBITS[encoding]) if encoding in _WBITS else None
    body = bytearray()
    async for chunk in response.aiter_raw():
        room = limit + 1 - len(body)  # at least 1: 0 would mean "no limit" to zlib
        try:
            body.extend(decompressor.decompress(chunk, room) if decompressor else chunk)
        except zlib.error as exc:
            raise httpx.DecodingError(f"the answer's {encoding} body is corrupt") from exc
        if len(body) > limit:
            del body[limit:]
            return bytes(body), True
    return bytes(body), False
