"""ops/code_metrics.py: function lengths and repeated places, on sources it is given (no
database, no files of the project)."""

import ast

from ops.code_metrics import functions_of, normalised_lines, repeated_places

_SIX_LINES = """\
    total = 0
    for item in items:
        total += item.amount
    if total > limit:
        raise ValueError(total)
    return total
"""


def test_it_measures_each_function_from_its_def_to_its_last_line():
    source = (
        "def outer():\n    def inner():\n        return 1\n    return inner\n\n\n"
        "class A:\n    def method(self):\n        pass\n"
    )
    lengths = {f.name: f.length for f in functions_of(ast.parse(source), "m.py")}
    assert lengths == {"outer": 4, "outer.inner": 2, "A.method": 2}


def test_it_compares_lines_without_whitespace_blank_lines_or_comments():
    assert normalised_lines("a = 1\n\n    # why\n  b  =  2\n") == [(1, "a=1"), (4, "b=2")]


def test_it_finds_six_alike_lines_in_two_modules_as_one_pair():
    first = f"def a(items, limit):\n{_SIX_LINES}"
    second = (
        f"def b(items, limit):\n    # the same, re-indented\n{_SIX_LINES.replace('    ', '  ')}"
    )
    pairs = repeated_places({"one.py": first, "two.py": second})
    assert [(a.path, a.first, a.last, b.path, b.first, b.last) for a, b in pairs] == [
        ("one.py", 2, 7, "two.py", 3, 8)
    ]


def test_five_alike_lines_are_not_a_pair():
    five = "".join(_SIX_LINES.splitlines(keepends=True)[:5])
    assert repeated_places({"one.py": f"x = 1\n{five}", "two.py": f"y = 2\n{five}"}) == []
