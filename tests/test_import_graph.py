"""The import graph's shape (tests/import_graph.py): no cycle between the run core's
packages, none between apps, and no import from a lower layer to a higher one."""

from tests.import_graph import report


def test_the_run_core_s_packages_import_each_other_one_way():
    found = report()

    assert [cycle for cycle in found["package_cycles"] if cycle[0].startswith("agent_runs")] == []


def test_apps_import_each_other_one_way():
    found = report()

    assert found["app_cycles"] == []


def test_no_module_imports_from_a_higher_layer():
    found = report()

    assert found["upward_imports"] == []
