"""What agent_runs/api/json_input.py tells of a JSON body's text: the pattern of a text that is
not blank, as the OpenAPI schema states it, against what the edges check (``str.strip()``)."""

import re
import sys

from agent_runs.api.json_input import NOT_BLANK_PATTERN


def test_the_not_blank_pattern_finds_exactly_the_characters_str_strip_keeps():
    pattern = re.compile(NOT_BLANK_PATTERN)
    every = (chr(code) for code in range(sys.maxunicode + 1))
    unmatched = {char for char in every if not pattern.search(char)}
    assert unmatched == {chr(code) for code in range(sys.maxunicode + 1) if chr(code).isspace()}
    assert not pattern.search(" \t\x1c\x85\u3000") and pattern.search(" \ufeff ")
