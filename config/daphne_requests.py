"""Daphne hands every request body to the application untouched.

Daphne builds its requests on Twisted's ``http.Request``, which by default parses a POST's
``multipart/form-data`` or URL-encoded body into ``request.args`` before the application
sees it. Daphne never reads those args, so that is a second parse of every upload (a 50 MB
artifact read into an e-mail parser for nothing), and a body Twisted cannot parse is answered
by Twisted itself with a bare ``400`` (no headers, no body) and a closed connection: the
protocol's own error (a JSON 400 or 404 in its shape) never gets a chance. Twisted lets a
request skip that parse (``parsePOSTFormSubmission=False``); daphne has no option for it, so
its request class is replaced by one that asks for it. Django parses the body, once, when a
view reads it.

Imported by ``config.asgi``, which daphne loads before it starts listening.
"""

from typing import Any

from daphne import http_protocol


class BodyUntouchedRequest(http_protocol.WebRequest):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["parsePOSTFormSubmission"] = False
        super().__init__(*args, **kwargs)


def install() -> None:
    """Make daphne's HTTP factory build ``BodyUntouchedRequest`` (it looks the name up per
    connection)."""
    http_protocol.WebRequest = BodyUntouchedRequest
