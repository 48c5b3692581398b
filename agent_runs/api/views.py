"""The base of every protocol's API views: errors rendered in the protocol's shape.

A protocol's ``errors`` module holds its renderer, ``render(exc, context)``: the response
for a domain error, a 404 or any DRF error, in the protocol's shape (``None``: a server
error, left to Django). A protocol's views name it once, on their base:

    class _Api(ProtocolView):
        error_renderer = staticmethod(render)
        not_found = "task not found"   # what a 404 says, where the shape has room for it
"""

from collections.abc import Callable
from typing import Any, ClassVar

from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

ErrorRenderer = Callable[[Exception, dict[str, Any]], Response | None]


class ProtocolView(APIView):
    """An ``APIView`` whose errors its protocol renders (``error_renderer``); with
    ``errors_as_json``, as JSON whatever the client accepts (a view that may answer a
    stream)."""

    errors_as_json: ClassVar[bool] = False
    not_found: ClassVar[str] = "not found"

    @staticmethod
    def error_renderer(exc: Exception, context: dict[str, Any]) -> Response | None:
        raise NotImplementedError  # each protocol's errors.render

    def get_exception_handler(self) -> ErrorRenderer:
        return self.error_renderer

    def handle_exception(self, exc: Exception) -> Response:
        if self.errors_as_json:
            self.request.accepted_renderer = JSONRenderer()
            self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)
