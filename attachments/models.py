from django.conf import settings
from django.db import models


class Attachment(models.Model):
    """An uploaded image: one object in storage at ``{bucket}/{path}``, owned by one user
    (docs/spec/chat-messages-and-attachments.md, User Message Attachments)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="attachments"
    )
    bucket = models.CharField(max_length=63)
    path = models.CharField(max_length=1024)
    mime_type = models.CharField(max_length=100)
    size = models.PositiveBigIntegerField(help_text="Bytes.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["bucket", "path"], name="attachment_unique_object")
        ]
        indexes = [models.Index(fields=["owner", "-created_at"], name="attachment_owner_recent")]

    def __str__(self) -> str:
        return f"{self.bucket}/{self.path}"

    @property
    def storage_name(self) -> str:
        """The object's name in the attachments storage: buckets are its top-level folders
        (or key prefixes, on S3)."""
        return f"{self.bucket}/{self.path}"
