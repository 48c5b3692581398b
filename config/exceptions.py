"""The default rendering of errors for the API: ``{"detail": "<message>"}``, the AG-UI and
spec shape. Every domain error carries its own status (config/errors.py); protocols with
another error shape render the same errors their own way."""

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found
from rest_framework.response import Response
from rest_framework.views import exception_handler

from config.errors import DomainError


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DomainError):
        return Response({"detail": str(exc)}, status=exc.status)
    return exception_handler(exc, context)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's 404 for a URL no route matches (a thread id that is not a UUID, say): the
    API's JSON shape under ``/api/`` and ``/storage/``, Django's page elsewhere."""
    if request.path.startswith(("/api/", "/storage/")):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception or Http404())
