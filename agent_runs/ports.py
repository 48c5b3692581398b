"""What the run core needs of the apps built on it, named here and filled by them: the core
never imports ``billing`` or ``attachments`` (they import the core), so it calls them through
these ports, which each app fills in its ``AppConfig.ready()``:

- ``billing``: record a model call's usage, a user's limits and the budget check, a run's
  usage summary, per model, its digest and its model calls (``billing/ports.py``);
- ``attachments``: a user's images (from a signed URL, their bytes, the metadata of a user
  message naming them, those only a thread names deleted) and the objects of its storage
  that artifacts are kept in (``attachments/ports.py``).

A port not filled raises ``PortNotFilled``, naming the app that fills it: a call is never
silently dropped. A port is resolved once by who calls it on every run (the worker's usage,
the budget check): filling is an attribute set at start-up, calling it a function call.
"""

from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.core.files import File

from agent_runs.usage import Limits, RunModelCalls, RunUsageByModel, UsageSummary

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from agent_runs.models import Run, Thread


class RecordedCall(Protocol):
    """A model call's usage as recorded: what its tracing span says of its cost."""

    cost: Decimal | None
    currency: str
    cost_source: str


class Billing(Protocol):
    """What the run core asks of billing (docs/billing.md)."""

    def usage_record(
        self,
        *,
        run: "Run",
        stage: str,
        model_id: str,
        usage: Mapping[str, Any],
        metadata: Mapping[str, Any],
    ) -> RecordedCall:
        """Store one model call's usage, priced."""

    def user_limits(self, *, user_id: Any) -> Limits:
        """The user's spending limits."""

    def budget_check(self, *, user_id: Any, limits: Limits | None = None) -> None:
        """``BudgetExceeded`` when a limit of the user's is reached."""

    def run_usage_summary(self, *, run: "Run", recorded_by: datetime | None = None) -> UsageSummary:
        """The run's ``usage_summary`` and cost, from its usage records."""

    def run_usage_by_model(self, *, run_pk: int, recorded_by: datetime) -> RunUsageByModel:
        """The run's usage from the records made by ``recorded_by``, per model and in all."""

    def run_usage_digest(self, *, run: "Run", any_records: bool = True) -> dict[str, Any]:
        """The usage fields of the run's ``TEXT_MESSAGE_END``."""

    def run_model_calls(self, *, run: "Run") -> RunModelCalls:
        """The run's usage records and their summary (the admin's run timeline)."""

    def usage_cost_display(self, summary: UsageSummary) -> str:
        """A usage summary's cost in words, for staff."""


class StoredImage(Protocol):
    """An image of a user's, where storage keeps it."""

    bucket: str
    path: str
    mime_type: str


class Attachments(Protocol):
    """What the run core asks of attachments (docs/spec/chat-messages-and-attachments.md)."""

    def image_from_signed_url(self, *, user: "AbstractBaseUser", url: str) -> StoredImage:
        """The caller's image a signed URL names (``AttachmentUrlInvalid`` otherwise)."""

    def image_read(self, *, user: Any, bucket: str, path: str) -> bytes:
        """The bytes of the user's image at ``bucket``/``path``."""

    def images_metadata(self, images: Sequence[StoredImage]) -> dict[str, Any]:
        """The keys a user message's ``metadata`` gets for its images, in block order."""

    def thread_images_delete(self, *, thread: "Thread") -> None:
        """Delete the owner's images that only this thread's messages name."""

    def object_save(self, *, name: str, file: File) -> str:
        """Store a file under (about) ``name``; the name it got."""

    def objects_delete(self, *, names: Sequence[str]) -> None:
        """Delete stored objects, once the caller's transaction commits."""

    def object_open(self, *, name: str) -> File:
        """A stored object, open for reading (``Http404`` when it has gone)."""


class PortNotFilled(ImproperlyConfigured):
    """The core called a port that no installed app filled."""


T = TypeVar("T")


class Port(Generic[T]):
    """A slot the run core calls through, filled by the app named ``filled_by``."""

    def __init__(self, *, name: str, filled_by: str) -> None:
        self.name = name
        self.filled_by = filled_by
        self._implementation: T | None = None

    def fill(self, implementation: T) -> None:
        self._implementation = implementation

    def __call__(self) -> T:
        """The implementation; ``PortNotFilled`` when none is."""
        implementation = self._implementation
        if implementation is None:
            raise PortNotFilled(
                f"the run core's {self.name} port is not filled: the {self.filled_by!r} app "
                f"fills it in its AppConfig.ready(); is it in INSTALLED_APPS?"
            )
        return implementation


billing: Port[Billing] = Port(name="billing", filled_by="billing")
attachments: Port[Attachments] = Port(name="attachments", filled_by="attachments")
