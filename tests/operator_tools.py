"""An operator tool, as an operator would write one, for the tests."""

from django.contrib.auth import get_user_model


def word_count(text: str) -> dict[str, int]:
    """Count the words of a text.

    Args:
        text: The text to count.
    """
    # A synchronous tool may use the ORM: it runs on a worker thread.
    return {"words": len(text.split()), "users": get_user_model().objects.count()}
