"""What an uploaded file is, judged by its own bytes: never by its name or declared type."""

import warnings
from dataclasses import dataclass
from typing import IO

from PIL import Image

from attachments.errors import AttachmentNotAnImage

# Decoding is what proves an image, and it costs memory: 25 million pixels is about 100 MB
# as RGBA, and more than any model reads (providers scale images down to a few megapixels).
MAX_PIXELS = 25_000_000


@dataclass(frozen=True)
class ImageKind:
    mime_type: str
    extension: str
    pillow_format: str


PNG = ImageKind("image/png", "png", "PNG")
JPEG = ImageKind("image/jpeg", "jpg", "JPEG")
GIF = ImageKind("image/gif", "gif", "GIF")
WEBP = ImageKind("image/webp", "webp", "WEBP")
IMAGE_KINDS = (PNG, JPEG, GIF, WEBP)

# The bytes each format starts with.
_SNIFF_BYTES = 12


def image_kind_sniff(head: bytes) -> ImageKind | None:
    """The image format a file's first bytes announce, if any."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if head.startswith(b"\xff\xd8\xff"):
        return JPEG
    if head.startswith((b"GIF87a", b"GIF89a")):
        return GIF
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return WEBP
    return None


def image_kind_detect(file: IO[bytes]) -> ImageKind:
    """The kind of image ``file`` holds: its magic number names a supported format and the
    whole of it decodes as that format (no other decoder is tried). Leaves the file at its
    start. Raises ``AttachmentNotAnImage`` otherwise."""
    file.seek(0)
    kind = image_kind_sniff(file.read(_SNIFF_BYTES))
    if kind is None:
        raise AttachmentNotAnImage("attachment must be a PNG, JPEG, GIF or WebP image")
    try:
        _decode(file, kind)
    except AttachmentNotAnImage:
        raise
    except Exception:  # whatever a decoder raises, the bytes are not an image
        raise AttachmentNotAnImage(
            f"attachment starts like {kind.mime_type} but does not decode as one"
        ) from None
    finally:
        file.seek(0)
    return kind


def _decode(file: IO[bytes], kind: ImageKind) -> None:
    with warnings.catch_warnings():
        # Pillow only warns between its limit and twice its limit: make that an error too.
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        file.seek(0)
        with Image.open(file, formats=[kind.pillow_format]) as image:
            image.verify()  # checksums and structure, where the format has them
        file.seek(0)
        with Image.open(file, formats=[kind.pillow_format]) as image:
            if image.width * image.height > MAX_PIXELS:
                raise AttachmentNotAnImage(
                    f"attachment image exceeds {MAX_PIXELS} pixels ({image.width}x{image.height})"
                )
            image.load()  # every byte of the (first) frame goes through the decoder
