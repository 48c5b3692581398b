from typing import Any

import pytest

from agent_runs.models import WorkerBeat


@pytest.fixture
def no_beats(transactional_db: Any) -> None:
    """No worker beats when the test starts: an in-process burst worker of an earlier test
    beats on a connection of its own, outside that test's transaction, so its row outlives
    the test."""
    WorkerBeat.objects.all().delete()
