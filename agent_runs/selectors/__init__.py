"""Reads and access checks of the run core. A thread that is not the caller's is a 404,
never a 403."""
