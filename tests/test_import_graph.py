"""The import graph's shape (tests/import_graph.py): no cycle between the run core's
packages, and no import from a lower layer to a higher one but those into
``config.openapi``, whose generic helpers are leaving ``config/`` (issue 29)."""

from tests.import_graph import report


def test_the_run_core_s_packages_import_each_other_one_way():
    found = report()

    assert [cycle for cycle in found["package_cycles"] if cycle[0].startswith("agent_runs")] == []


def test_no_module_imports_from_a_higher_layer_but_config_openapi():
    found = report()

    assert [pair for pair in found["upward_imports"] if pair[1] != "config.openapi"] == []
