"""Which image and audio bytes pass as their declared type (``governance.media``, redteam48, C1-27): each
listed type's own file start passes, another type's, a page or no base64 does not."""

from __future__ import annotations

import base64

import pytest

from governance.media import AUDIO_SIGNATURES, IMAGE_SIGNATURES, base64_bytes_match, data_url_image_matches
from governance.modeltext import text_links_defanged

# The first bytes of a file of each type, as its format's specification starts it.
STARTS = {
    "image/png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10",
    "image/jpeg": b"\xff\xd8\xff\xe0\x00\x10JFIF",
    "image/gif": b"GIF87a\x10\x00\x10\x00",
    "image/webp": b"RIFF\x24\x00\x00\x00WEBPVP8 ",
    "image/avif": b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00",
    "image/bmp": b"BM\x36\x00\x00\x00",
    "image/x-icon": b"\x00\x00\x01\x00\x01\x00",
    "image/tiff": b"II*\x00\x08\x00\x00\x00",
    "audio/wav": b"RIFF\x24\x00\x00\x00WAVEfmt ",
    "audio/mpeg": b"\xff\xfb\x90\x64",
    "audio/aac": b"\xff\xf1\x50\x80",
    "audio/ogg": b"OggS\x00\x02",
    "audio/flac": b"fLaC\x00\x00\x00\x22",
    "audio/webm": b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81",
    "audio/mp4": b"\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00",
}
PAGE = b"<!doctype html><script>alert(document.domain)</script>"


def _signature(kind: str):
    return IMAGE_SIGNATURES.get(kind) or AUDIO_SIGNATURES.get(kind)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize("kind", sorted(STARTS))
def test_each_type_passes_as_itself_and_no_other_type_or_page_does(kind):
    assert base64_bytes_match(kind, _b64(STARTS[kind]))
    assert base64_bytes_match(kind, _b64(STARTS[kind]).rstrip("="))  # missing padding
    assert not base64_bytes_match(kind, _b64(PAGE))
    assert not base64_bytes_match(kind, "<svg onload=alert(1)>")
    # MP3 and AAC (ADTS) frames start alike: one rule reads both.
    others = {STARTS[other] for other in STARTS if _signature(other) is not _signature(kind)}
    assert not [other for other in others if base64_bytes_match(kind, _b64(other))]


def test_every_listed_type_is_exercised_and_unlisted_types_never_pass():
    assert {"image/svg+xml", "text/html", "audio/x-unknown"}.isdisjoint({*IMAGE_SIGNATURES, *AUDIO_SIGNATURES})
    assert not base64_bytes_match("image/svg+xml", _b64(b"<svg/>"))
    assert not base64_bytes_match("text/html", _b64(PAGE))


def test_a_data_url_icon_passes_only_as_the_raster_image_it_says():
    assert data_url_image_matches(f"data:image/png;base64,{_b64(STARTS['image/png'])}")
    assert data_url_image_matches("data:image/gif,GIF89a%01%00%01%00")
    assert not data_url_image_matches(f"data:image/png;base64,{_b64(PAGE)}")
    assert not data_url_image_matches("data:image/png,<script>alert(1)</script>")
    assert not data_url_image_matches(f"data:image/svg+xml;base64,{_b64(b'<svg/>')}")


def test_a_header_claiming_more_pixels_than_a_decoder_takes_is_refused():
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    assert base64_bytes_match("image/png", _b64(png + (9_000).to_bytes(4, "big") * 2))
    assert not base64_bytes_match("image/png", _b64(png + (10_000).to_bytes(4, "big") * 2))
    assert not base64_bytes_match("image/gif", _b64(b"GIF89a" + (65_535).to_bytes(2, "little") * 2))


def test_an_inline_image_written_in_a_text_points_nowhere_unless_its_bytes_are_its_type():
    """A Markdown or HTML image written in a result's text (or a tool's description) inline as a data: URL was kept
    by its declared type alone."""
    page, png = _b64(PAGE), _b64(STARTS["image/png"])
    text = (
        f'![a](data:image/png;base64,{page}) ![b](data:image/png;base64,{png}) <img src="data:image/gif;base64,{page}">'
    )
    assert text_links_defanged(text) == f'![a](#) ![b](data:image/png;base64,{png}) <img src="#">'
