"""A migration test's database: taken back to an app's migration, brought back after."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


@contextmanager
def migrated_back_to(app: str, name: str) -> Iterator[Apps]:
    """The database at ``app``'s migration ``name``, and the models as they were then; the
    database brought back to the latest migrations after."""
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes(app)
    executor.migrate([(app, name)])
    try:
        yield executor.loader.project_state((app, name)).apps
    finally:
        MigrationExecutor(connection).migrate(latest)


def migrate_to(app: str, name: str) -> Apps:
    """The database taken to ``app``'s migration ``name`` (forwards or back); its models."""
    executor = MigrationExecutor(connection)
    executor.migrate([(app, name)])
    return MigrationExecutor(connection).loader.project_state((app, name)).apps
