"""Server-sent events framing (docs/spec/sse-events-and-usage.md, section 2): ``id`` / ``event`` /
``data`` lines, a frame per event, separated by a blank line (``\\n\\n``, which every client
splits on)."""

import json
from typing import Any

KEEP_ALIVE_FRAME = b": keep-alive\n\n"


def sse_frame(event_id: int, payload: dict[str, Any]) -> bytes:
    """``id`` / ``event`` / ``data`` lines of one SSE event."""
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"id: {event_id}\nevent: {payload['type']}\ndata: {data}\n\n".encode()


def retry_frame(milliseconds: int) -> bytes:
    return f"retry: {milliseconds}\n\n".encode()
