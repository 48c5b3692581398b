"""The A2A edge's live fixtures: daphne (its ``PUBLIC_BASE_URL`` its own address, so the
agent card's interface URL reaches it) and a real worker, with the demo model or a loopback
model server the test steers."""

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import DEMO, fake_model_env, serving
from tests.fake_llm import FakeOpenAI


@pytest.fixture
def port(redis_queue: Any) -> Iterator[int]:
    """The demo model in every stage."""
    with serving(**DEMO) as port:
        yield port


@pytest.fixture
def model(redis_queue: Any) -> Iterator[FakeOpenAI]:
    """The router's and the worker's model on a loopback server the test steers."""
    with FakeOpenAI() as fake:
        with serving(**fake_model_env(fake)) as port:
            fake.port = port  # type: ignore[attr-defined]  # the test's handle on the server
            yield fake
        fake.delay = 0
