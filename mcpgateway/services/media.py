"""Whether an upstream's image or audio is what its declared type says (the output policy, T9/C1-27).

A tool result's image and audio blocks (and an embedded image or audio resource, and an icon inline as a ``data:``
URL) carry base64 bytes and a ``mimeType`` that the upstream writes. A host or a model provider reads the bytes by
that type, or sniffs them: HTML or an SVG document typed ``image/png`` is a page to a host that sniffs it or saves
it under its bytes' type, and a model provider refuses an image whose bytes are not of its declared type, which
fails every later turn of the conversation that holds it. So only the types below pass, and only when the whole
value is base64 and its bytes start as that type's files start (their magic numbers); a PNG or GIF whose header
claims more pixels than Pillow would decode (a decoder's bomb) goes too.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from urllib.parse import unquote_to_bytes


def _starts(*prefixes: bytes) -> Callable[[bytes], bool]:
    return lambda data: data.startswith(prefixes)


def _riff(form: bytes) -> Callable[[bytes], bool]:
    return lambda data: data[:4] == b"RIFF" and data[8:12] == form


def _iso_media(*brands: bytes) -> Callable[[bytes], bool]:
    """An ISO base media file (MP4, AVIF): a ``ftyp`` box first, of one of ``brands``."""
    return lambda data: data[4:8] == b"ftyp" and data[8:12] in brands


def _mpeg_audio(data: bytes) -> bool:
    """An MP3 (or AAC in ADTS): an ID3 tag, or a frame's 11-bit sync word first."""
    return data.startswith(b"ID3") or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0)


# Pillow's decompression-bomb threshold (``Image.MAX_IMAGE_PIXELS``): a PNG or GIF whose header claims more pixels
# is a few bytes on the wire and gigabytes in whatever decodes it (a host, a model provider).
MAX_IMAGE_PIXELS = 89_478_485


def _png(data: bytes) -> bool:
    """A PNG, of at most MAX_IMAGE_PIXELS when its header (IHDR, first) is there to say."""
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return False
    if data[12:16] != b"IHDR":
        return True
    return int.from_bytes(data[16:20], "big") * int.from_bytes(data[20:24], "big") <= MAX_IMAGE_PIXELS


def _gif(data: bytes) -> bool:
    """A GIF, of at most MAX_IMAGE_PIXELS by its logical screen size."""
    if not data.startswith((b"GIF87a", b"GIF89a")):
        return False
    return int.from_bytes(data[6:8], "little") * int.from_bytes(data[8:10], "little") <= MAX_IMAGE_PIXELS


# Raster images only: an SVG is a document that can carry script (a host opening it, or inlining it, runs it).
IMAGE_SIGNATURES: dict[str, Callable[[bytes], bool]] = {
    "image/png": _png,
    "image/jpeg": _starts(b"\xff\xd8\xff"),
    "image/gif": _gif,
    "image/webp": _riff(b"WEBP"),
    "image/avif": _iso_media(b"avif", b"avis"),
    "image/bmp": _starts(b"BM"),
    "image/x-icon": _starts(b"\x00\x00\x01\x00", b"\x00\x00\x02\x00"),
    "image/tiff": _starts(b"II*\x00", b"MM\x00*"),
}

# The major brands an MP4 holding audio is written under (iTunes' M4A/M4B/M4P, the ISO and DASH ones), not AVIF's.
MP4_AUDIO_BRANDS = (b"M4A ", b"M4B ", b"M4P ", b"mp41", b"mp42", b"isom", b"iso2", b"iso5", b"iso6", b"dash")
AUDIO_SIGNATURES: dict[str, Callable[[bytes], bool]] = {
    **dict.fromkeys(("audio/wav", "audio/wave", "audio/x-wav", "audio/vnd.wave"), _riff(b"WAVE")),
    **dict.fromkeys(("audio/mpeg", "audio/mp3", "audio/aac", "audio/aacp"), _mpeg_audio),
    **dict.fromkeys(("audio/ogg", "audio/opus"), _starts(b"OggS")),
    **dict.fromkeys(("audio/flac", "audio/x-flac"), _starts(b"fLaC")),
    "audio/webm": _starts(b"\x1a\x45\xdf\xa3"),
    **dict.fromkeys(("audio/mp4", "audio/x-m4a", "audio/m4a"), _iso_media(*MP4_AUDIO_BRANDS)),
}


def media_type(text: str) -> str:
    """A media type without its parameters, lower case (``IMAGE/PNG; q=1`` is image/png). A tab or line break
    inside it stays, and so matches no type: a browser removes them (``image/s\tvg+xml`` is an SVG)."""
    return text.split(";", 1)[0].strip(" ").lower()


def base64_bytes_match(kind: str, data: object) -> bool:
    """Whether ``data`` is base64 (ASCII white space and missing padding aside) of bytes of the image or audio type
    ``kind`` (``media_type`` of it) that ``IMAGE_SIGNATURES`` or ``AUDIO_SIGNATURES`` lists."""
    signature = IMAGE_SIGNATURES.get(kind) or AUDIO_SIGNATURES.get(kind)
    if signature is None or not isinstance(data, str):
        return False
    compact = "".join(data.split())
    try:
        raw = base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)
    except (binascii.Error, ValueError):  # not base64, or not ASCII
        return False
    return signature(raw)


def data_url_image_matches(url: str) -> bool:
    """Whether a ``data:`` URL is a raster image whose bytes are of its declared type (``data:image/png;base64,…``,
    or percent-encoded bytes without ``;base64``)."""
    header, comma, body = url[len("data:") :].partition(",")
    kind = media_type(header)
    if not comma or kind not in IMAGE_SIGNATURES:
        return False
    if header.rstrip(" ").lower().endswith(";base64"):
        return base64_bytes_match(kind, body)
    return IMAGE_SIGNATURES[kind](unquote_to_bytes(body))
