"""The default rendering of errors for the API: ``{"detail": "<message>"}``, the AG-UI and
spec shape. Every domain error carries its own status (config/errors.py); protocols with
another error shape render the same errors their own way."""

from typing import Any

from rest_framework.response import Response
from rest_framework.views import exception_handler

from config.errors import DomainError


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DomainError):
        return Response({"detail": str(exc)}, status=exc.status)
    return exception_handler(exc, context)
