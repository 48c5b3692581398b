"""Daphne's requests: a body larger than its route can take is refused before it is read, and
every other body reaches the application untouched. A route that takes uploads (a view with
a multipart parser) takes up to ``REQUEST_BODY_MAX_BYTES``; any other, up to
``JSON_BODY_MAX_BYTES`` (the largest JSON body an endpoint reads), or that limit if smaller.

Daphne builds its requests on Twisted's ``http.Request``, which keeps the whole body (in a
temporary file past 100 KB) before daphne hands it on; daphne then queues all of it for the
application at once, in memory, where it stays until the application has read it, and
fragments the heap it leaves (a 300 MB body grew the process by 300 MB, for good). So the
request checks the body's size as it comes: a ``Content-Length`` over the route's limit is answered
``413`` as soon as the headers are in, a chunked body as soon as it passes the limit; the
rest of it is read and dropped (a client still sending reads the answer, rather than a
reset), then the connection is closed. The answer is in the error shape of the protocol the
path is under (``config.exceptions.error_body``), plain text elsewhere.

Twisted also parses a POST's ``multipart/form-data`` or URL-encoded body into
``request.args`` before the application sees it. Daphne never reads those args, so that is a
second parse of every upload (a 50 MB artifact read into an e-mail parser for nothing), and a
body Twisted cannot parse is answered by Twisted itself with a bare ``400`` (no headers, no
body) and a closed connection: the protocol's own error (a JSON 400 or 404 in its shape)
never gets a chance. Twisted lets a request skip that parse (``parsePOSTFormSubmission=
False``). Django parses the body, once, when a view reads it.

Daphne has no option for either, so its request class is replaced (``install``); imported by
``config.asgi``, which daphne loads before it starts listening.
"""

import io
import json
from functools import lru_cache
from http import HTTPStatus
from typing import IO, Any
from urllib.parse import unquote

from daphne import http_protocol
from django.conf import settings
from django.urls import Resolver404, resolve
from rest_framework.parsers import MultiPartParser

from config.exceptions import error_body

# The largest JSON body an endpoint reads (an AG-UI conversation turn's, 2 MB): a larger one
# sent to a route without uploads is refused unread.
JSON_BODY_MAX_BYTES = 2 * 1024 * 1024


class ServiceRequest(http_protocol.WebRequest):
    content: IO[bytes]  # Twisted's, where the body is kept

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["parsePOSTFormSubmission"] = False
        super().__init__(*args, **kwargs)
        self.body_received = 0
        self.refused = False
        self.limit: int | None = None  # the route's, once a body is larger than the least

    def gotLength(self, length: int | None) -> None:
        if length is not None and self._over_limit(length):
            super().gotLength(0)  # somewhere to keep nothing
            self._refuse()
        else:
            super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self.refused:
            return
        self.body_received += len(data)
        if self._over_limit(self.body_received):
            self.content.close()  # what was kept of a chunked body
            self.content = io.BytesIO()
            self._refuse()
            return
        super().handleContentChunk(data)

    def _over_limit(self, size: int) -> bool:
        if size <= min(JSON_BODY_MAX_BYTES, settings.REQUEST_BODY_MAX_BYTES):
            return False  # within what any route takes: no look at the route
        if self.limit is None:
            self.limit = body_limit(self._target_path())
        return size > self.limit

    def _target_path(self) -> str:
        # The request's path is set once its body is in; the channel has it from the start.
        target: bytes = self.channel._path
        return unquote(target.split(b"?", 1)[0].decode("ascii", "replace"))

    def process(self) -> Any:
        """Run the application, unless the body was refused: it has ended now, and was
        answered when it was refused."""
        if self.refused:
            self.channel.loseConnection()
            return None
        return super().process()

    def _refuse(self) -> None:
        self.refused = True
        # Twisted would answer a client waiting for "100 Continue" with it, after the 413.
        self.requestHeaders.removeHeader(b"Expect")
        path = self._target_path()
        assert self.limit is not None, "set by _over_limit, which refuses"
        self.channel.transport.write(refusal(path, self.limit))


@lru_cache(maxsize=1024)
def body_limit(path: str) -> int:
    """The largest body the route of ``path`` takes: ``REQUEST_BODY_MAX_BYTES`` where its view
    parses uploads, else ``JSON_BODY_MAX_BYTES`` (no larger than the first)."""
    try:
        view = resolve(path).func
    except Resolver404:
        view = None
    parsers = getattr(getattr(view, "cls", None), "parser_classes", ())
    if any(issubclass(parser, MultiPartParser) for parser in parsers):
        return int(settings.REQUEST_BODY_MAX_BYTES)
    return min(JSON_BODY_MAX_BYTES, settings.REQUEST_BODY_MAX_BYTES)


def refusal(path: str, limit: int) -> bytes:
    """The whole ``413`` answer to a body over ``limit`` sent to ``path``."""
    message = f"the request body exceeds the limit of {limit} bytes"
    body = error_body(path, 413, message)
    content, content_type = (
        (json.dumps(body).encode(), b"application/json")
        if body is not None
        else (message.encode(), b"text/plain; charset=utf-8")
    )
    head = [
        b"HTTP/1.1 413 " + HTTPStatus(413).phrase.encode(),
        b"Content-Type: " + content_type,
        b"Content-Length: " + str(len(content)).encode(),
        b"X-Content-Type-Options: nosniff",
        b"Connection: close",
    ]
    return b"\r\n".join(head) + b"\r\n\r\n" + content


def install() -> None:
    """Make daphne's HTTP factory build ``ServiceRequest`` (it looks the name up per
    connection)."""
    http_protocol.WebRequest = ServiceRequest
