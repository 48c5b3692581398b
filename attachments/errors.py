"""Domain errors of attachments; config/exceptions.py maps each to its HTTP status.

Every message is meant for the client as it stands.
"""


class AttachmentError(Exception):
    """Base of every attachment error."""


class AttachmentFileMissing(AttachmentError):
    """The upload carried no ``file`` field (or more than one file)."""


class AttachmentTooLarge(AttachmentError):
    """The upload is over ``ATTACHMENT_MAX_BYTES``."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"attachment exceeds size limit of {max_bytes} bytes")


class AttachmentNotAnImage(AttachmentError):
    """The upload's own bytes are not a PNG, JPEG, GIF or WebP image that decodes; its name and
    declared type are never consulted."""


class ObjectPathInvalid(AttachmentError):
    """A bucket or object path that could escape its place in storage (``..``, an absolute
    path, a backslash, a NUL, an encoded slash...) or is otherwise malformed."""


class SignedUrlInvalid(AttachmentError):
    """A URL or token that is not a signed URL of this service's shape."""


class SignedUrlTampered(SignedUrlInvalid):
    """The token's signature does not hold, or it was issued for another object."""


class SignedUrlExpired(SignedUrlInvalid):
    """The token was genuine but its time is up."""


class AttachmentUrlInvalid(AttachmentError):
    """A run's binary content ``url`` is not a valid, unexpired signed URL of an attachment
    the caller owns (spec/run-agent-input.md, Compatibility Notes). Maps to 422."""
