"""The import cycles between packages and between apps, and the imports from a lower layer
to a higher one, counted on the code with grimp (which import-linter is built on):

    .venv/bin/python -m tests.import_graph

A *package* is a sub-package of an app (``agent_runs.services``; a protocol,
``agent_runs.protocols.a2a``) or a module at an app's root (``agent_runs.signals``); an
*app* is a top-level package. The layers, highest first, are ``LAYERS``: a module imports
only from its own layer or lower ones (docs/architecture.md, the one-way rule)."""

import sys
from collections import defaultdict
from collections.abc import Iterable

import grimp

APPS = ("agent_runs", "history", "attachments", "billing", "config", "console", "ops")

# Highest first; a module's layer is that of the longest prefix naming it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("config",),
    ("console", "ops", "history", "agent_runs.management", "agent_runs.admin"),
    # The HTTP edges: the protocols, the service's own REST resources, the edge kit they (and
    # the other apps' views) use, the worker side.
    (
        "agent_runs.protocols",
        "agent_runs.resources",
        "agent_runs.api",
        "agent_runs.runtime",
        "attachments.views",
        "attachments.urls",
        "attachments.storage_urls",
        "billing.views",
        "billing.urls",
    ),
    ("attachments", "billing", "agent_runs"),
)


def package_of(module: str) -> str:
    parts = module.split(".")
    depth = 3 if parts[:2] == ["agent_runs", "protocols"] else 2
    return ".".join(parts[:depth])


def layer_of(module: str) -> int:
    best, found = -1, len(LAYERS)
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(f"{name}.")) and len(name) > best:
                best, found = len(name), index
    return found


def imports(graph: grimp.ImportGraph) -> Iterable[tuple[str, str]]:
    for importer in graph.modules:
        if importer.split(".")[0] not in APPS:
            continue
        for imported in graph.find_modules_directly_imported_by(importer):
            if imported.split(".")[0] in APPS:
                yield importer, imported


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for following in edges.get(node, ()):
            if following not in index:
                visit(following)
                low[node] = min(low[node], low[following])
            elif following in stack:
                low[node] = min(low[node], index[following])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def report() -> dict[str, list]:
    graph = grimp.build_graph(*APPS)
    packages: dict[str, set[str]] = defaultdict(set)
    apps: dict[str, set[str]] = defaultdict(set)
    upward = []
    for importer, imported in imports(graph):
        if package_of(importer) != package_of(imported):
            packages[package_of(importer)].add(package_of(imported))
        if importer.split(".")[0] != imported.split(".")[0]:
            apps[importer.split(".")[0]].add(imported.split(".")[0])
        if layer_of(imported) < layer_of(importer):
            upward.append((importer, imported))
    return {
        "package_cycles": cycles(packages),
        "app_cycles": cycles(apps),
        "upward_imports": sorted(upward),
    }


def main() -> None:
    found = report()
    for name, items in found.items():
        print(f"{name}: {len(items)}")
        for item in items:
            print(f"  {' <-> '.join(item) if name.endswith('cycles') else ' -> '.join(item)}")
    sys.exit(0)


if __name__ == "__main__":
    main()
