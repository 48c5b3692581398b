"""docs/configuration.md lists exactly the environment variables config/settings/ reads.

A plain unit test: it parses both files and touches neither the database nor Redis.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "config" / "settings"
CONFIGURATION_DOC = ROOT / "docs" / "configuration.md"

# config/env.py's typed readers: each takes the variable's name first.
ENV_READERS = {"env_str", "env_bool", "env_int", "env_float", "env_list", "env_decimal"}
# Reads of os.environ (or a name bound to it): environ.get(...), environ.setdefault(...).
ENVIRON_METHODS = {"get", "setdefault", "pop"}
# A variable in the documentation: `NAME` in the first cell of a table row.
_DOC_VARIABLE = re.compile(r"`([A-Z][A-Z0-9_]*)`")


def _dotted(node: ast.expr) -> str:
    """``os.environ`` for the expression ``os.environ``; "" for anything not a dotted name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        parent = _dotted(node.value)
        return f"{parent}.{node.attr}" if parent else ""
    return ""


def _is_environ(node: ast.expr) -> bool:
    return _dotted(node).split(".")[-1] == "environ"


def _reads_environment(call: ast.Call) -> bool:
    """A call of a typed reader, ``getenv``, or a reading method of ``os.environ``."""
    function = call.func
    if _dotted(function).split(".")[-1] in {*ENV_READERS, "getenv"}:
        return True
    return (
        isinstance(function, ast.Attribute)
        and function.attr in ENVIRON_METHODS
        and _is_environ(function.value)
    )


def _name_argument(call: ast.Call) -> ast.expr | None:
    return call.args[0] if call.args else None


def settings_variables(source: str) -> tuple[set[str], list[str]]:
    """The variable names ``source`` reads from the environment, and a description of each
    read whose name is not a string literal (which this test could not check)."""
    names: set[str] = set()
    unreadable: list[str] = []

    def take(argument: ast.expr | None, where: ast.AST) -> None:
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            names.add(argument.value)
        else:
            unreadable.append(f"line {getattr(where, 'lineno', '?')}: {ast.unparse(where)}")

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            if _reads_environment(node):
                take(_name_argument(node), node)
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            take(node.slice, node)
        elif (
            isinstance(node, ast.Compare)
            and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
            and any(_is_environ(comparator) for comparator in node.comparators)
        ):
            take(node.left, node)
    return names, unreadable


def settings_sources() -> list[str]:
    """The source of every part of the settings (config/settings/*.py)."""
    return [path.read_text() for path in sorted(SETTINGS.glob("*.py"))]


def all_settings_variables() -> tuple[set[str], list[str]]:
    names: set[str] = set()
    unreadable: list[str] = []
    for source in settings_sources():
        part_names, part_unreadable = settings_variables(source)
        names |= part_names
        unreadable += part_unreadable
    return names, unreadable


def documented_variables(markdown: str) -> set[str]:
    """The variables the documentation lists: backticked names in a table row's first cell."""
    names: set[str] = set()
    for line in markdown.splitlines():
        if not line.startswith("|"):
            continue
        first_cell = line.split("|")[1]
        names.update(_DOC_VARIABLE.findall(first_cell))
    return names


def test_the_parser_finds_each_kind_of_environment_read():
    source = (
        "import os\n"
        "from os import environ\n"
        "A = env_str('A')\n"
        "B = env_bool('B', False)\n"
        "C = env_int('C', 1, minimum=0)\n"
        "D = env_float('D', 1.0)\n"
        "E = env_list('E', [])\n"
        "F = os.environ.get('F')\n"
        "G = os.getenv('G', '')\n"
        "H = os.environ['H']\n"
        "I = environ.get('I')\n"
        "J = 'J' in os.environ\n"
        "K = env_str(name)\n"
    )
    names, unreadable = settings_variables(source)
    assert names == set("ABCDEFGHIJ")
    assert unreadable == ["line 13: env_str(name)"]


def test_settings_read_every_variable_by_a_literal_name():
    names, unreadable = all_settings_variables()
    assert not unreadable, "a variable read this test cannot name: " + "; ".join(unreadable)
    assert {"DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL"} <= names


def test_every_variable_the_settings_read_is_documented():
    names, _ = all_settings_variables()
    documented = documented_variables(CONFIGURATION_DOC.read_text())
    missing = sorted(names - documented)
    assert not missing, f"add these to docs/configuration.md: {missing}"


def test_the_documentation_lists_no_variable_the_settings_do_not_read():
    names, _ = all_settings_variables()
    documented = documented_variables(CONFIGURATION_DOC.read_text())
    unknown = sorted(documented - names)
    assert not unknown, f"docs/configuration.md lists variables nobody reads: {unknown}"
