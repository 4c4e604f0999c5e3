"""Images whose header claims more pixels than a decoder takes (redteam50, T13/C1-27): a few hundred bytes on the wire,
gigabytes in the host or model provider that decodes them. redteam48 capped the pixels of PNG and GIF only; a JPEG,
WebP, BMP, TIFF, icon or AVIF claiming 65,535 x 65,535 passed as it came. Over HTTP against the live gateway and a real
(scripted) stdio upstream; the header readers' edge cases without a database."""

from __future__ import annotations

import base64

import pytest

from governance.choices import AuditEventType
from governance.media import (
    AVIF_BOXES_READ,
    GIF_SUB_BLOCKS_READ,
    ICON_ENTRIES_READ,
    JPEG_SEGMENTS_READ,
    TIFF_ENTRIES_READ,
    base64_bytes_match,
)
from governance.models import AuditEvent

from .conftest import gateway_db, scripted_answer

BIG, SMALL = 65_500, 100  # 4.3 billion pixels; ten thousand


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def jpeg(side: int, *, before: bytes = b"") -> bytes:
    """A JPEG's start: a JFIF header, ``before`` (more segments, stray bytes), a baseline frame of ``side`` squared."""
    frame = b"\xff\xc0\x00\x11\x08" + side.to_bytes(2, "big") * 2 + b"\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00" + before + frame + b"\xff\xda"


def webp_extended(side: int) -> bytes:
    canvas = (side - 1).to_bytes(3, "little") * 2
    return b"RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00" + canvas


def webp_lossy(side: int) -> bytes:
    return b"RIFF\x00\x00\x00\x00WEBPVP8 \x00\x00\x00\x00\x00\x00\x00\x9d\x01\x2a" + side.to_bytes(2, "little") * 2


def webp_lossless(side: int) -> bytes:
    bits = (side - 1) | (side - 1) << 14
    return b"RIFF\x00\x00\x00\x00WEBPVP8L\x00\x00\x00\x00\x2f" + bits.to_bytes(4, "little")


def bmp(side: int) -> bytes:
    return b"BM" + b"\x00" * 12 + (40).to_bytes(4, "little") + side.to_bytes(4, "little", signed=True) * 2


def tiff(side: int, *, entries: int = 2, pages: int = 1) -> bytes:
    """A TIFF of ``pages`` directories in a chain, each of ``entries`` entries: its width and length (``side``), then
    a private tag (65000) to fill."""
    tags = [(256, 4, side), (257, 4, side)] + [(65_000, 3, 0)] * (entries - 2)
    body = b"".join(
        tag.to_bytes(2, "little") + kind.to_bytes(2, "little") + (1).to_bytes(4, "little") + value.to_bytes(4, "little")
        for tag, kind, value in tags
    )
    size = 2 + len(body) + 4
    directories = b"".join(
        entries.to_bytes(2, "little") + body + (8 + size * (page + 1) if page + 1 < pages else 0).to_bytes(4, "little")
        for page in range(pages)
    )
    return b"II*\x00\x08\x00\x00\x00" + directories


def icon_of_png(side: int, *, entries: int = 1) -> bytes:
    """An icon whose directory's ``entries`` say 256 x 256 (its largest) and point at one image, a PNG that says
    ``side`` squared."""
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + side.to_bytes(4, "big") * 2
    at = 6 + 16 * entries  # after the directory
    entry = b"\x00\x00\x00\x00\x01\x00\x20\x00" + len(png).to_bytes(4, "little") + at.to_bytes(4, "little")
    return b"\x00\x00\x01\x00" + entries.to_bytes(2, "little") + entry * entries + png


def avif(side: int, *, sizes: int = 1, boxes_before: int = 0) -> bytes:
    """An AVIF whose ``meta`` holds ``sizes`` ispe boxes of ``side`` squared, after its ftyp and ``boxes_before``
    empty top-level boxes."""
    ispe = b"\x00\x00\x00\x14ispe\x00\x00\x00\x00" + side.to_bytes(4, "big") * 2
    meta = (8 + len(ispe) * sizes).to_bytes(4, "big") + b"meta" + ispe * sizes
    ftyp = b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00avifmif1miaf"
    return ftyp + b"\x00\x00\x00\x08free" * boxes_before + meta


def gif_frame(side: int) -> bytes:
    """A GIF whose logical screen is 1 x 1 (what redteam48 read), with a global palette, a frame's control extension
    and a comment before a first image of ``side`` squared."""
    head = b"GIF89a\x01\x00\x01\x00\x80\x00\x00" + b"\x00\x00\x00\xff\xff\xff"
    extensions = b"\x21\xf9\x04\x00\x00\x00\x00\x00" + b"\x21\xfe\x03abc\x02de\x00"
    image = b"\x2c\x00\x00\x00\x00" + side.to_bytes(2, "little") * 2 + b"\x00\x02\x02\x44\x01\x00\x3b"
    return head + extensions + image


BOMBS = {
    "image/gif": gif_frame,
    "image/jpeg": jpeg,
    "image/webp": webp_extended,
    "image/bmp": bmp,
    "image/tiff": tiff,
    "image/x-icon": icon_of_png,
    "image/avif": avif,
}


@pytest.mark.parametrize(
    ("kind", "build"),
    [*BOMBS.items(), ("image/webp", webp_lossy), ("image/webp", webp_lossless)],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_each_format_passes_at_a_decodable_size_and_not_past_the_pixel_cap(kind, build):
    assert base64_bytes_match(kind, _b64(build(SMALL)))
    assert not base64_bytes_match(kind, _b64(build(BIG if build is not webp_lossy else 16_383)))


def test_a_jpeg_frame_after_metadata_or_stray_bytes_is_read_and_a_segment_flood_is_refused():
    metadata = b"\xff\xe1" + (65_000).to_bytes(2, "big") + b"\x00" * 64_998
    assert not base64_bytes_match("image/jpeg", _b64(jpeg(BIG, before=metadata * 10)))
    assert not base64_bytes_match("image/jpeg", _b64(jpeg(BIG, before=b"\x00\x01garbage\xff\xff\xff")))
    assert base64_bytes_match("image/jpeg", _b64(jpeg(SMALL, before=metadata)))
    # A flood of empty segments (and a megabyte of fill bytes) costs one bounded walk, not a loop per byte.
    assert not base64_bytes_match("image/jpeg", _b64(jpeg(SMALL, before=b"\xff\xfe\x00\x02" * JPEG_SEGMENTS_READ)))
    assert base64_bytes_match("image/jpeg", _b64(b"\xff\xd8\xff" + b"\xff" * 1_000_000))


def test_a_gif_frame_is_read_after_its_extensions_and_a_flood_of_them_is_refused():
    assert not base64_bytes_match("image/gif", _b64(gif_frame(BIG)))
    at_an_offset = gif_frame(SMALL).replace(b"\x2c\x00\x00\x00\x00", b"\x2c\xff\xff\xff\xff")
    assert not base64_bytes_match("image/gif", _b64(at_an_offset))  # a small frame far out enlarges the canvas
    head = b"GIF89a\x01\x00\x01\x00\x00\x00\x00"
    flood = head + b"\x21\xfe" + b"\x01a" * GIF_SUB_BLOCKS_READ + b"\x00" + gif_frame(SMALL)[13 + 6 :]
    assert not base64_bytes_match("image/gif", _b64(flood))
    empty_extensions = head + b"\x21\xfe\x00" * GIF_SUB_BLOCKS_READ + gif_frame(SMALL)[13 + 6 :]
    assert not base64_bytes_match("image/gif", _b64(empty_extensions))
    assert base64_bytes_match("image/gif", _b64(head + b"\x21\xfe\x01a\x00" * 100 + gif_frame(SMALL)[13 + 6 :]))


def test_overlapping_tiff_directories_are_read_within_a_budget():
    """A chain of directories 4 bytes apart, each listing 65,535 entries over the same megabyte: 20,000 of them
    would be 1.3 billion entries read."""
    data = bytearray(b"II*\x00\x08\x00\x00\x00" + b"\x00" * 1_000_000)
    step, directories = 4, 20_000
    for n in range(directories):
        at = 8 + step * n
        data[at : at + 2] = (65_535).to_bytes(2, "little")
        data[at + 2 + 12 * 65_535 : at + 6 + 12 * 65_535] = (at + step).to_bytes(4, "little")
    assert TIFF_ENTRIES_READ < 65_536 * 2
    assert not base64_bytes_match("image/tiff", _b64(bytes(data)))


def test_a_tiffs_directories_are_read_within_a_budget():
    """media3: a TIFF directory of 65,535 entries (a megabyte) passed after 8 to 35 times a 1 MB base64 decode, the
    slowest of these readers left. Real TIFFs list tens of tags per directory (libtiff's test files: 11 to 25)."""
    assert TIFF_ENTRIES_READ == 4_096  # each directory charged its entries and one for itself
    assert base64_bytes_match("image/tiff", _b64(tiff(SMALL, entries=4_095)))
    assert not base64_bytes_match("image/tiff", _b64(tiff(SMALL, entries=4_096)))
    assert not base64_bytes_match("image/tiff", _b64(tiff(SMALL, entries=65_535)))
    # A multi-page TIFF: 150 pages of 25 tags pass (3,900 charged); at 158 pages the last is not read: refused.
    assert base64_bytes_match("image/tiff", _b64(tiff(SMALL, entries=25, pages=150)))
    assert not base64_bytes_match("image/tiff", _b64(tiff(SMALL, entries=25, pages=158)))


def test_an_icons_directory_is_read_within_a_budget():
    """media2: an icon listing 65,535 entries over one small image (a megabyte) passed after 127 times a 1 MB base64
    decode, the slowest of these readers. Real icons list a handful (idle.ico: 7)."""
    assert base64_bytes_match("image/x-icon", _b64(icon_of_png(SMALL, entries=ICON_ENTRIES_READ)))
    assert not base64_bytes_match("image/x-icon", _b64(icon_of_png(SMALL, entries=ICON_ENTRIES_READ + 1)))
    assert not base64_bytes_match("image/x-icon", _b64(icon_of_png(SMALL, entries=65_535)))


def test_an_avifs_boxes_are_read_within_a_budget():
    """media2: an AVIF of 50,000 ispe boxes passed after 59 times a 1 MB base64 decode; a megabyte of empty top-level
    boxes before its meta cost as much (media3). Real AVIFs (libavif's test files) have up to 4 ispe, meta second."""
    assert base64_bytes_match("image/avif", _b64(avif(SMALL, sizes=AVIF_BOXES_READ, boxes_before=AVIF_BOXES_READ - 1)))
    assert not base64_bytes_match("image/avif", _b64(avif(SMALL, sizes=AVIF_BOXES_READ + 1)))
    assert not base64_bytes_match("image/avif", _b64(avif(SMALL, boxes_before=AVIF_BOXES_READ)))


@gateway_db
@pytest.mark.slow
def test_an_upstreams_image_claiming_more_pixels_than_a_decoder_takes_is_removed_and_audited(
    gateway, member_on, admin_user, tmp_path
):
    """Before: every bomb below reached the caller as it came (the GIF's screen says 1 x 1, its frame 65,500 squared;
    only a PNG or GIF screen was read)."""
    bombs = [{"type": "image", "mimeType": kind, "data": _b64(build(BIG))} for kind, build in BOMBS.items()]
    embedded = {"type": "resource", "resource": {"uri": "https://example.com/a.jpg", "mimeType": "image/jpeg"}}
    embedded["resource"]["blob"] = _b64(jpeg(BIG))
    fine = [{"type": "image", "mimeType": kind, "data": _b64(build(SMALL))} for kind, build in BOMBS.items()]
    result = {"content": [{"type": "text", "text": "photos"}, *bombs, embedded, *fine]}
    answer = scripted_answer(gateway, tmp_path, "photos::fetch", result, member_on=member_on, admin_user=admin_user)
    assert not answer.is_error, answer
    images = [(block.mime_type, block.data) for block in answer.content if block.type == "image"]
    assert images == [(block["mimeType"], block["data"]) for block in fine]
    assert answer.content[-1].text.startswith(f"The gateway removed {len(BOMBS) + 1} image(s) of this result")
    event = AuditEvent.objects.filter(event_type=AuditEventType.EXECUTION).latest("pk")
    assert event.payload["output_removed"] == {"images": len(BOMBS) + 1}
