"""The one place where domain errors become HTTP responses: ``{"detail": "<message>"}``."""

from typing import Any

from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from agent_runs.errors import RunIdAmbiguous, RunIdConflict, RunInputInvalid, RunPayloadTooLarge
from attachments.errors import (
    AttachmentFileMissing,
    AttachmentNotAnImage,
    AttachmentTooLarge,
    AttachmentUrlInvalid,
    ObjectPathInvalid,
    SignedUrlExpired,
    SignedUrlInvalid,
    SignedUrlTampered,
)
from history.errors import HistoryQueryInvalid

_STATUS_BY_ERROR: dict[type[Exception], int] = {
    RunPayloadTooLarge: status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    RunInputInvalid: status.HTTP_422_UNPROCESSABLE_ENTITY,
    RunIdConflict: status.HTTP_409_CONFLICT,
    RunIdAmbiguous: status.HTTP_409_CONFLICT,
    HistoryQueryInvalid: status.HTTP_422_UNPROCESSABLE_ENTITY,
    # attachments: subclasses before their base (SignedUrlInvalid), since the first match wins.
    AttachmentFileMissing: status.HTTP_400_BAD_REQUEST,
    AttachmentTooLarge: status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    AttachmentNotAnImage: status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
    AttachmentUrlInvalid: status.HTTP_422_UNPROCESSABLE_ENTITY,
    ObjectPathInvalid: status.HTTP_400_BAD_REQUEST,
    SignedUrlExpired: status.HTTP_403_FORBIDDEN,
    SignedUrlTampered: status.HTTP_403_FORBIDDEN,
    SignedUrlInvalid: status.HTTP_400_BAD_REQUEST,
}


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    for error_class, status_code in _STATUS_BY_ERROR.items():
        if isinstance(exc, error_class):
            return Response({"detail": str(exc)}, status=status_code)
    return exception_handler(exc, context)
