"""Real image bytes, made with Pillow."""

import io
import random

from PIL import Image


def image_bytes(
    image_format: str,
    *,
    size: tuple[int, int] = (8, 6),
    noise: bool = False,
    colour: tuple[int, int, int] = (200, 40, 90),
) -> bytes:
    image = Image.new("RGB", size, colour)
    if noise:
        # Random pixels do not compress: the file is about as big as its pixels.
        generator = random.Random(size[0] * size[1])
        image.putdata(
            [tuple(generator.randrange(256) for _ in range(3)) for _ in range(size[0] * size[1])]
        )
    buffer = io.BytesIO()
    image.save(buffer, format=image_format)
    return buffer.getvalue()


def png_bytes(*, size: tuple[int, int] = (8, 6), noise: bool = False) -> bytes:
    return image_bytes("PNG", size=size, noise=noise)


def jpeg_bytes() -> bytes:
    return image_bytes("JPEG")


def gif_bytes() -> bytes:
    return image_bytes("GIF")


def webp_bytes() -> bytes:
    return image_bytes("WEBP")
