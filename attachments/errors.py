"""Domain errors of attachments, each with its ``code`` and HTTP ``status``.

Every message is meant for the client as it stands.
"""

from agent_runs.errors import DomainError


class AttachmentError(DomainError):
    """Base of every attachment error."""


class AttachmentFileMissing(AttachmentError):
    """The upload carried no ``file`` field (or more than one file)."""

    code = "file_missing"
    status = 400


class AttachmentTooLarge(AttachmentError):
    """The upload is over ``ATTACHMENT_MAX_BYTES``."""

    code = "attachment_too_large"
    status = 413

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"attachment exceeds size limit of {max_bytes} bytes")


class AttachmentNotAnImage(AttachmentError):
    """The upload's own bytes are not a PNG, JPEG, GIF or WebP image that decodes; its name and
    declared type are never consulted."""

    code = "not_an_image"
    status = 415


class ObjectPathInvalid(AttachmentError):
    """A bucket or object path that could escape its place in storage (``..``, an absolute
    path, a backslash, a NUL, an encoded slash...) or is otherwise malformed."""

    code = "invalid_object_path"
    status = 400


class SignedUrlInvalid(AttachmentError):
    """A URL or token that is not a signed URL of this service's shape."""

    code = "invalid_signed_url"
    status = 400


class SignedUrlTampered(SignedUrlInvalid):
    """The token's signature does not hold, or it was issued for another object."""

    code = "signed_url_tampered"
    status = 403


class SignedUrlExpired(SignedUrlInvalid):
    """The token was genuine but its time is up."""

    code = "signed_url_expired"
    status = 403


class AttachmentUrlInvalid(AttachmentError):
    """A run's binary content ``url`` is not a valid, unexpired signed URL of an attachment
    the caller owns (docs/spec/run-agent-input.md, Compatibility Notes). Maps to 422."""

    code = "invalid_attachment_url"
    status = 422
