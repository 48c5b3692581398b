"""Decoding the answer of the worker's structured output while its JSON arguments stream."""

import json
import re

# What ends a plain run of the answer: its closing quote or an escape.
_ANSWER_STOP = re.compile(r'["\\]')


class StructuredAnswer:
    """The top-level ``answer`` string of the structured output's JSON arguments, decoded
    as the pieces arrive, each character looked at once: the answer's plain runs are cut
    out whole (``re.search`` for its next quote or backslash), the JSON around it is read
    character by character. Escapes split across pieces wait for their end; an ``answer``
    key nested in another value is not the answer."""

    def __init__(self) -> None:
        self.text = ""
        self._depth = 0
        self._in_string = False
        self._escaped = False
        self._key: list[str] | None = None  # a top-level key being read
        self._last_key = ""
        self._expect_value = False
        self._capturing = False
        self._escape = ""  # an escape of the answer not complete yet
        self._done = False

    def feed(self, piece: str) -> str:
        """The answer text this piece adds."""
        added: list[str] = []
        position, end = 0, len(piece)
        while position < end and not self._done:
            if self._capturing:
                position = self._answer_run(piece, position, added)
            else:
                self._structure_char(piece[position])
                position += 1
        if not added:
            return ""
        new_text = added[0] if len(added) == 1 else "".join(added)
        self.text += new_text
        return new_text

    def _answer_run(self, piece: str, position: int, added: list[str]) -> int:
        """Read the answer from ``position``: a plain run up to its next quote or escape,
        or one character of an escape; the position after what was read."""
        if self._escape:
            self._escape += piece[position]
            if self._escape_complete():
                added.append(_decode_escape(self._escape))
                self._escape = ""
            return position + 1
        stop = _ANSWER_STOP.search(piece, position)
        if stop is None:
            added.append(piece[position:])
            return len(piece)
        at = stop.start()
        if at > position:
            added.append(piece[position:at])
        if piece[at] == '"':
            self._capturing, self._done = False, True
        else:
            self._escape = "\\"
        return at + 1

    def _escape_complete(self) -> bool:
        escape = self._escape
        if len(escape) < 2 or (escape[1] == "u" and len(escape) < 6):
            return False
        if escape[1] == "u" and 0xD800 <= _hex(escape[2:6]) <= 0xDBFF:
            # The high half of a surrogate pair: its low half follows as another \u escape.
            return len(escape) >= 12 or (len(escape) > 6 and not "\\u".startswith(escape[6:8]))
        return True

    def _structure_char(self, char: str) -> None:
        if self._in_string:
            if self._escaped:
                self._escaped = False
            elif char == "\\":
                self._escaped = True
            elif char == '"':
                self._in_string = False
                if self._key is not None:
                    self._last_key = _decode_escape('"' + "".join(self._key) + '"', quoted=True)
                    self._key = None
                return
            if self._key is not None:
                self._key.append(char)
            return
        top = self._depth == 1
        if char == '"':
            if top and self._expect_value and self._last_key == "answer":
                self._capturing = True
                return
            self._in_string = True
            if top and not self._expect_value:
                self._key = []
        elif char in "{[":
            self._depth += 1
        elif char in "}]":
            self._depth -= 1
        elif char == ":" and top:
            self._expect_value = True
        elif char == "," and top:
            self._expect_value, self._last_key = False, ""


def _decode_escape(text: str, *, quoted: bool = False) -> str:
    try:
        value: str = json.loads(text if quoted else f'"{text}"')
    except json.JSONDecodeError:
        return ""
    return value


def _hex(text: str) -> int:
    try:
        return int(text, 16)
    except ValueError:
        return -1
