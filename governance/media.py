"""Whether an upstream's image or audio is what its declared type says (the output policy, T9/C1-27).

A tool result's image and audio blocks (and an embedded image or audio resource, and an icon inline as a ``data:``
URL) carry base64 bytes and a ``mimeType`` that the upstream writes. A host or a model provider reads the bytes by
that type, or sniffs them: HTML or an SVG document typed ``image/png`` is a page to a host that sniffs it or saves
it under its bytes' type, and a model provider refuses an image whose bytes are not of its declared type, which
fails every later turn of the conversation that holds it. So only the types below pass, and only when the whole
value is base64 and its bytes start as that type's files start (their magic numbers); a raster image whose header
claims more pixels than Pillow would decode (a decoder's bomb: a few bytes on the wire, gigabytes in whatever decodes
it) goes too, whatever its format (PNG, GIF, JPEG, WebP, BMP, TIFF, an icon's embedded images, AVIF).

The sizes are read here, not by Pillow's ``Image.open`` (weighed in bench/NOTES-media2.md): Pillow reads what it
decodes, so a TIFF's later pages and an icon's smaller images went unread and a header cut short opened as no image;
it decodes an icon's largest image on open (a 315 kB icon: 315 MB); and it walks JPEG fill bytes, GIF sub-blocks and
PNG chunks one Python turn each, 86 to 1,000,000 times this module's time on the same megabyte.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Literal
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


def _fits(width: int, height: int) -> bool:
    return abs(width) * abs(height) <= MAX_IMAGE_PIXELS


def _png(data: bytes) -> bool:
    """A PNG, of at most MAX_IMAGE_PIXELS when its header (IHDR, first) is there to say."""
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return False
    if data[12:16] != b"IHDR":
        return True
    return _fits(int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big"))


# Data sub-blocks (and the empty ones ending them) skipped before a GIF's first image, in its extensions (a frame's
# control, a loop count, XMP, comments): a real file has a few dozen; a megabyte of one-byte sub-blocks or of empty
# extensions would cost a Python loop per byte or two. Past it: refused.
GIF_SUB_BLOCKS_READ = 10_000


def _gif(data: bytes) -> bool:
    """A GIF, of at most MAX_IMAGE_PIXELS by its logical screen size and by its first image's extent: a first frame
    larger than the screen enlarges the canvas in browsers and Pillow alike (redteam50: a 1 x 1 screen whose frame
    says 65,535 x 65,535 passed)."""
    if not data.startswith((b"GIF87a", b"GIF89a")):
        return False
    if not _fits(int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")):
        return False
    at = 13 + (3 << ((data[10] & 7) + 1) if len(data) > 10 and data[10] & 0x80 else 0)  # after the global colours
    budget = GIF_SUB_BLOCKS_READ
    while at < len(data) and data[at] == 0x21:  # an extension: its label, then sub-blocks to an empty one
        at += 2
        while at < len(data):
            budget -= 1
            if budget < 0:
                return False
            if not data[at]:
                break
            at += 1 + data[at]
        at += 1
    if at + 9 > len(data) or data[at] != 0x2C:  # no image (cut short, the trailer): nothing to decode
        return True
    left, top, width, height = (int.from_bytes(data[at + n : at + n + 2], "little") for n in (1, 3, 5, 7))
    return _fits(left + width, top + height)


# The markers of a JPEG frame header (SOF0-SOF15 but DHT, JPG and DAC) and of a hierarchical one's size (DHP).
_JPEG_SIZES = {*range(0xC0, 0xD0)} - {0xC4, 0xC8, 0xCC} | {0xDE}
# A marker: 0xFF and its code (the last 0xFF of a run: the others are fill bytes). A decoder skips stray bytes before
# one, so the search does too. No repetition in the pattern: a megabyte of 0xFF is searched once, not once a byte.
_JPEG_MARKER = re.compile(rb"\xff([^\xff])")
# Segments read before the first scan: a photo has a few dozen (tables, metadata); a megabyte of four-byte segments
# would cost the gateway a Python loop of 250,000 turns per image. One past this many is no image to pass on.
JPEG_SEGMENTS_READ = 1_000


def _jpeg(data: bytes) -> bool:
    """A JPEG, each of whose frame headers up to the first scan claims at most MAX_IMAGE_PIXELS (redteam50: a frame
    of 65,535 x 65,535 is a few hundred bytes, 12 GB decoded). Segments are walked by their lengths, so a frame
    header after megabytes of metadata, or after stray bytes a decoder skips, is read too."""
    if not data.startswith(b"\xff\xd8\xff"):
        return False
    at = 2
    for _ in range(JPEG_SEGMENTS_READ):
        found = _JPEG_MARKER.search(data, at)
        if found is None or found.end() + 2 > len(data):
            return True  # cut short: no decoder gets to a frame
        marker, at = found[1][0], found.end()  # ``at``: the segment's length, which counts itself
        if marker == 0xDA:  # start of scan: every frame header came before
            return True
        if marker in _JPEG_SIZES and at + 7 <= len(data):
            if not _fits(int.from_bytes(data[at + 3 : at + 5], "big"), int.from_bytes(data[at + 5 : at + 7], "big")):
                return False
        at += int.from_bytes(data[at : at + 2], "big")
    return False


def _webp(data: bytes) -> bool:
    """A WebP, of at most MAX_IMAGE_PIXELS by its first chunk's size: the extended format's canvas (up to 2^24 each
    way), a lossy or lossless frame's (up to 16,383 each way)."""
    if not (data[:4] == b"RIFF" and data[8:12] == b"WEBP"):
        return False
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width, height = int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    elif chunk == b"VP8 " and len(data) >= 30:
        width, height = int.from_bytes(data[26:28], "little") & 0x3FFF, int.from_bytes(data[28:30], "little") & 0x3FFF
    elif chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        width, height = (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    else:
        return True
    return _fits(width, height)


def _dib_fits(data: bytes, at: int) -> bool:
    """Whether a device-independent bitmap header at ``at`` (a BMP's, an icon's image) claims at most
    MAX_IMAGE_PIXELS: 32-bit signed sizes, but 16-bit unsigned ones in the old 12-byte header."""
    size = int.from_bytes(data[at : at + 4], "little")
    if size == 12 and len(data) >= at + 8:
        return _fits(int.from_bytes(data[at + 4 : at + 6], "little"), int.from_bytes(data[at + 6 : at + 8], "little"))
    if size >= 16 and len(data) >= at + 12:
        width = int.from_bytes(data[at + 4 : at + 8], "little", signed=True)
        return _fits(width, int.from_bytes(data[at + 8 : at + 12], "little", signed=True))
    return True


def _bmp(data: bytes) -> bool:
    return data.startswith(b"BM") and _dib_fits(data, 14)


# Directory entries an icon may list: a real one has a handful to a few dozen (an image per size, 16 to 256, and per
# colour depth); 65,535 entries pointing at one small image are a megabyte that cost a Python loop of 65,535 turns per
# image (media2: the slowest of these readers). More than this many is no icon to pass on.
ICON_ENTRIES_READ = 1_000


def _icon(data: bytes) -> bool:
    """An icon or cursor, each of whose images (a PNG or a bitmap, at the offset its directory entry gives) claims at
    most MAX_IMAGE_PIXELS: the directory's own sizes stop at 256, the images' headers do not."""
    if not data.startswith((b"\x00\x00\x01\x00", b"\x00\x00\x02\x00")):
        return False
    count = int.from_bytes(data[4:6], "little")
    if count > ICON_ENTRIES_READ:
        return False
    for entry in range(6, min(6 + 16 * count, len(data) - 15), 16):
        at = int.from_bytes(data[entry + 12 : entry + 16], "little")
        if not (_png(data[at : at + 24]) if data[at : at + 4] == b"\x89PNG" else _dib_fits(data, at)):
            return False
    return True


# TIFF tags of an image's width and length, and the sizes of the types a size is written in (SHORT, LONG).
_TIFF_SIZE_TAGS = (256, 257)
_TIFF_TYPES = {3: 2, 4: 4}
# Directory entries read in one TIFF, all its directories together (each charged its entries and one for itself): a
# real directory has tens (libtiff's 35 test files and Python's: 11 to 25, in 1 to 5 directories), and libtiff refuses
# one of more than 4,096 as no directory at all. Directories may overlap, so without a cap a chain of them each
# listing 65,535 entries over the same bytes would cost time quadratic in the size, and a megabyte of one directory's
# entries cost 8 to 35 times a 1 MB base64 decode (media3), the slowest of these readers. 4,096 leaves room for
# some 150 pages of 25 tags. Past it: refused, no image to pass on.
TIFF_ENTRIES_READ = 4_096


def _tiff(data: bytes) -> bool:
    """A TIFF, whose every image (the chain of image file directories, as far as the bytes go) claims at most
    MAX_IMAGE_PIXELS."""
    if not data.startswith((b"II*\x00", b"MM\x00*")):
        return False
    order: Literal["little", "big"] = "little" if data[:2] == b"II" else "big"
    at, seen, budget = int.from_bytes(data[4:8], order), set(), TIFF_ENTRIES_READ
    while 8 <= at and at + 2 <= len(data) and at not in seen:
        seen.add(at)
        sizes = {}
        count = int.from_bytes(data[at : at + 2], order)
        budget -= count + 1
        if budget < 0:
            return False
        for entry in range(at + 2, min(at + 2 + 12 * count, len(data) - 11), 12):
            tag = int.from_bytes(data[entry : entry + 2], order)
            kind = int.from_bytes(data[entry + 2 : entry + 4], order)
            if tag in _TIFF_SIZE_TAGS and kind in _TIFF_TYPES:
                sizes[tag] = int.from_bytes(data[entry + 8 : entry + 8 + _TIFF_TYPES[kind]], order)
        if not _fits(sizes.get(256, 0), sizes.get(257, 0)):
            return False
        next_at = at + 2 + 12 * count
        at = int.from_bytes(data[next_at : next_at + 4], order) if next_at + 4 <= len(data) else 0
    return True


# Boxes read in each of an AVIF's two walks (the top-level boxes up to ``meta``, the ``ispe`` boxes in it): a real
# file has a handful of each (libavif's 73 test files: meta second, at most 4 ispe, a grid's tiles sharing one); a
# megabyte of 8-byte top-level boxes or of 20-byte ispe boxes would cost a Python loop of 125,000 or 50,000 turns per
# image. 4,000 leaves room for a grid of 63 x 63 tiles each with its own. More than this many is no image to pass on.
AVIF_BOXES_READ = 4_000


def _avif(data: bytes) -> bool:
    """An AVIF (an ISO media file of brand avif or avis), none of whose image spatial extents (``ispe`` boxes: every
    image item's size, which a decoder allocates) claims more than MAX_IMAGE_PIXELS."""
    if not _iso_media(b"avif", b"avis")(data):
        return False
    meta = _top_level_box(data, b"meta")
    if meta is None:
        return False
    start, end = meta
    at, budget = data.find(b"ispe", start, end), AVIF_BOXES_READ
    while at >= 0:
        budget -= 1
        if budget < 0:
            return False
        if not _fits(int.from_bytes(data[at + 8 : at + 12], "big"), int.from_bytes(data[at + 12 : at + 16], "big")):
            return False
        at = data.find(b"ispe", at + 4, end)
    return True


def _top_level_box(data: bytes, kind: bytes) -> tuple[int, int] | None:
    """Where the first top-level box of type ``kind`` of an ISO media file lies in ``data`` (as far as the bytes go);
    (0, 0) when there is none; None when more than AVIF_BOXES_READ boxes come before it."""
    at = 0
    for _ in range(AVIF_BOXES_READ + 1):
        if at + 8 > len(data):
            return 0, 0
        size, found = int.from_bytes(data[at : at + 4], "big"), data[at + 4 : at + 8]
        if size == 1:  # a 64-bit size follows the type
            size = int.from_bytes(data[at + 8 : at + 16], "big")
        elif size == 0:  # to the end of the file
            size = len(data) - at
        if found == kind:
            return at, min(at + size, len(data))
        if size < 8:
            return 0, 0
        at += size
    return None


# Raster images only: an SVG is a document that can carry script (a host opening it, or inlining it, runs it).
IMAGE_SIGNATURES: dict[str, Callable[[bytes], bool]] = {
    "image/png": _png,
    "image/jpeg": _jpeg,
    "image/gif": _gif,
    "image/webp": _webp,
    "image/avif": _avif,
    "image/bmp": _bmp,
    "image/x-icon": _icon,
    "image/tiff": _tiff,
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
