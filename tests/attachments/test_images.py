"""Images are judged by their own bytes (pure: no database)."""

import io

import pytest

from attachments import images
from attachments.errors import AttachmentNotAnImage
from attachments.images import image_kind_detect, image_kind_sniff
from tests.attachments.images import gif_bytes, image_bytes, jpeg_bytes, png_bytes, webp_bytes


@pytest.mark.parametrize(
    ("content", "mime_type", "extension"),
    [
        (png_bytes(), "image/png", "png"),
        (jpeg_bytes(), "image/jpeg", "jpg"),
        (gif_bytes(), "image/gif", "gif"),
        (webp_bytes(), "image/webp", "webp"),
    ],
)
def test_it_detects_each_supported_format(content: bytes, mime_type: str, extension: str) -> None:
    file = io.BytesIO(content)
    kind = image_kind_detect(file)
    assert (kind.mime_type, kind.extension) == (mime_type, extension)
    assert file.tell() == 0


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"<html><script>alert(1)</script></html>",
        b"%PDF-1.7\n",
        b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
        image_bytes("BMP"),
        image_bytes("TIFF"),
    ],
)
def test_it_rejects_what_is_not_a_supported_image(content: bytes) -> None:
    with pytest.raises(AttachmentNotAnImage, match="must be a PNG, JPEG, GIF or WebP image"):
        image_kind_detect(io.BytesIO(content))


@pytest.mark.parametrize(
    "content",
    [
        b"\x89PNG\r\n\x1a\n",
        b"\x89PNG\r\n\x1a\n<html><script>alert(1)</script></html>",
        png_bytes()[:-20],
        png_bytes()[:40] + b"\x00" * 4 + png_bytes()[44:],
        b"\xff\xd8\xff\xe0<?php system($_GET['c']); ?>",
        jpeg_bytes()[: len(jpeg_bytes()) // 2],
        b"GIF89a" + b"\x00" * 4,
        b"RIFF\x10\x00\x00\x00WEBPVP8 garbage",
    ],
)
def test_it_rejects_bytes_that_only_start_like_an_image(content: bytes) -> None:
    assert image_kind_sniff(content) is not None
    with pytest.raises(AttachmentNotAnImage, match="does not decode"):
        image_kind_detect(io.BytesIO(content))


def test_it_rejects_an_image_with_too_many_pixels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(images, "MAX_PIXELS", 47)
    with pytest.raises(AttachmentNotAnImage, match="exceeds 47 pixels"):
        image_kind_detect(io.BytesIO(png_bytes(size=(8, 6))))
    assert image_kind_detect(io.BytesIO(png_bytes(size=(8, 5)))).mime_type == "image/png"
