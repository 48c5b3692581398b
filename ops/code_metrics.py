"""Size and repetition figures of the project's code (a developer command; see docs/operations.md).

    .venv/bin/python ops/code_metrics.py            # the summary
    .venv/bin/python ops/code_metrics.py --list     # every long function and repeated place

It reads the Python source of the apps (``tests/`` and ``migrations/`` left out) and prints:
modules over 400 lines; functions over 50 and over 30 lines, with the share of all functions
over 30; and the pairs of places where six or more lines in a row are alike. A function's
length runs from its ``def`` line to its last line (decorators and its docstring included,
nested functions counted in their parent and on their own). Lines are compared normalised:
whitespace stripped, blank lines, comment-only lines and import statements dropped, so a
copy re-indented or re-commented still counts. A pair is two maximal runs of alike lines, one
in each place (two runs in one file count too, if they do not overlap).

No Django, no imports of the code: it parses the files, so it runs on any checkout.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent_runs", "attachments", "billing", "config", "console", "history", "ops")
MODULE_LIMIT = 400
FUNCTION_LIMIT = 50
FUNCTION_SOFT_LIMIT = 30
SOFT_SHARE_TARGET = 0.03
ALIKE_LINES = 6


@dataclass(frozen=True)
class Function:
    path: str
    name: str
    line: int
    length: int


@dataclass(frozen=True)
class Place:
    path: str
    first: int
    last: int


def source_files(root: Path = ROOT) -> list[Path]:
    """The apps' Python files, tests and migrations aside."""
    files = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).parts
            if "migrations" in parts or "tests" in parts:
                continue
            files.append(path)
    return files


def functions_of(tree: ast.AST, path: str) -> Iterator[Function]:
    stack: list[tuple[ast.AST, str]] = [(tree, "")]
    while stack:
        node, prefix = stack.pop()
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                yield Function(path, name, child.lineno, length)
                name += "."
            elif isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}."
            stack.append((child, name))


def normalised_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line without whitespace) of the lines that carry code (imports say what
    a module uses: two modules that use the same things do not repeat code)."""
    imports = _import_lines(text)
    kept = []
    for number, line in enumerate(text.splitlines(), start=1):
        squeezed = "".join(line.split())
        if squeezed and not squeezed.startswith("#") and number not in imports:
            kept.append((number, squeezed))
    return kept


def _import_lines(text: str) -> set[int]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def repeated_places(texts: dict[str, str], size: int = ALIKE_LINES) -> list[tuple[Place, Place]]:
    """Pairs of places with `size` or more alike lines in a row (maximal runs)."""
    lines = {path: normalised_lines(text) for path, text in texts.items()}
    links = _alike_windows(lines, size)
    pairs = []
    for path_a, start_a, path_b, start_b in sorted(links):
        if (path_a, start_a - 1, path_b, start_b - 1) in links:
            continue  # inside a run that started earlier
        length = size
        while (path_a, start_a + length - size + 1, path_b, start_b + length - size + 1) in links:
            length += 1
        if path_a == path_b and start_b < start_a + length:
            continue  # a run alike with itself shifted (e.g. a list of similar lines)
        kept_a, kept_b = lines[path_a], lines[path_b]
        pairs.append(
            (
                Place(path_a, kept_a[start_a][0], kept_a[start_a + length - 1][0]),
                Place(path_b, kept_b[start_b][0], kept_b[start_b + length - 1][0]),
            )
        )
    return pairs


def _alike_windows(
    lines: dict[str, list[tuple[int, str]]], size: int
) -> set[tuple[str, int, str, int]]:
    """Each pair of alike windows of ``size`` lines, as (path, start, other path, its start);
    runs of windows shifted by one make one pair of places."""
    windows: dict[bytes, list[tuple[str, int]]] = defaultdict(list)
    for path, kept in lines.items():
        for start in range(len(kept) - size + 1):
            joined = "\n".join(line for _, line in kept[start : start + size])
            windows[hashlib.blake2b(joined.encode(), digest_size=16).digest()].append((path, start))
    links: set[tuple[str, int, str, int]] = set()
    for starts in windows.values():
        for i, (path_a, start_a) in enumerate(starts):
            for path_b, start_b in starts[i + 1 :]:
                links.add((path_a, start_a, path_b, start_b))
    return links


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list every function over 30 lines")
    options = parser.parse_args(argv)
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in source_files()}
    functions = [f for path, text in texts.items() for f in functions_of(ast.parse(text), path)]
    print(f"{len(texts)} modules, {len(functions)} functions (tests and migrations aside)")
    _report_sizes(texts, functions, list_all=options.list)
    pairs = repeated_places(texts)
    print(f"\npairs of places with {ALIKE_LINES} or more alike lines: {len(pairs)}")
    for a, b in pairs:
        print(f"  {a.path}:{a.first}-{a.last}  ~  {b.path}:{b.first}-{b.last}")
    return 0


def _report_sizes(texts: dict[str, str], functions: list[Function], *, list_all: bool) -> None:
    long_modules = sorted(
        ((path, text.count("\n")) for path, text in texts.items()), key=lambda item: -item[1]
    )
    long_modules = [(path, n) for path, n in long_modules if n > MODULE_LIMIT]
    print(f"\nmodules over {MODULE_LIMIT} lines: {len(long_modules)}")
    for path, n in long_modules:
        print(f"  {n:5}  {path}")
    by_length = sorted(functions, key=lambda f: -f.length)
    over_limit = [f for f in by_length if f.length > FUNCTION_LIMIT]
    over_soft = [f for f in by_length if f.length > FUNCTION_SOFT_LIMIT]
    print(f"\nfunctions over {FUNCTION_LIMIT} lines: {len(over_limit)}")
    for f in over_limit:
        print(f"  {f.length:5}  {f.path}:{f.line} {f.name}")
    share = len(over_soft) / len(functions) if functions else 0.0
    print(
        f"\nfunctions over {FUNCTION_SOFT_LIMIT} lines: {len(over_soft)} of {len(functions)}"
        f" = {share:.1%} (target {SOFT_SHARE_TARGET:.0%})"
    )
    for f in over_soft if list_all else []:
        print(f"  {f.length:5}  {f.path}:{f.line} {f.name}")


if __name__ == "__main__":
    sys.exit(main())
