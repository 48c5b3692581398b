"""JSON request bodies every protocol's edge reads: decoded refusing what JSON or Python
cannot carry, and checked for what the store cannot keep (PostgreSQL's text and jsonb refuse
NUL, UTF-8 cannot encode a lone surrogate). Each protocol words the errors its own way."""

import json
import math
import re
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

# How deep a body may nest, counting its object as level 1 (so AG-UI's ``state`` and
# ``forwardedProps`` hold 62 more levels): far more than any real input needs, and well
# inside what the JSON decoder, pydantic and PostgreSQL's jsonb each handle.
MAX_JSON_DEPTH = 64
# The longest integer (in digits) a body may hold. Python refuses to convert an integer of
# more than 4,300 digits, and no field here means one of more than a few dozen.
MAX_JSON_INT_DIGITS = 100


class MalformedJson(ValueError):
    """A body that is not JSON this service can read."""


class JsonTooDeep(ValueError):
    """A body nested too deep for the decoder itself."""


def json_decode(body: bytes) -> Any:
    """The JSON value of a request body.

    ``MalformedJson`` for a body that is not JSON (bad syntax, bad encoding), and for numbers
    no JSON peer can read back: ``NaN``, ``Infinity``, ``-Infinity`` (not JSON, RFC 8259), a
    float beyond a double's range, an integer of more than ``MAX_JSON_INT_DIGITS`` digits;
    ``JsonTooDeep`` for one the decoder cannot descend.
    """
    try:
        return json.loads(
            body,
            parse_int=_json_int,
            parse_float=_json_float,
            parse_constant=_json_constant,
        )
    except RecursionError:
        raise JsonTooDeep() from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedJson(str(exc)) from None


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_JSON_INT_DIGITS:
        raise MalformedJson(f"an integer longer than {MAX_JSON_INT_DIGITS} digits")
    return int(text)


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 32 else text[:32] + "..."
        raise MalformedJson(f"a number out of range ({shown})")
    return value


def _json_constant(name: str) -> Any:
    raise MalformedJson(f"{name} is not a JSON value")


# A text that is not blank, as a JSON Schema ``pattern``: it holds a character ``str.strip()``
# keeps. Python's whitespace (``str.isspace``) spelt out, since ``\s`` differs between
# regex engines (ECMA-262's has U+FEFF and lacks U+001C-U+001F and U+0085).
NOT_BLANK_PATTERN = (
    "[^\\t-\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
)

# What no stored string may hold: NUL (PostgreSQL) and lone surrogates (UTF-8). A surrogate
# pair sent as two escapes is decoded to the one character it spells, and passes.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def json_unstorable_place(data: dict[str, Any] | list[Any]) -> tuple[str, str] | None:
    """One walk of a decoded body: where it breaks the depth limit or holds a NUL or a lone
    surrogate in a string or key, as its path (``.state.items[2]``) and the reason; ``None``
    when it breaks neither."""
    try:
        _walk(data, depth=1)
    except _Unstorable as exc:
        path = "".join(
            f"[{part}]" if isinstance(part, int) else _key_path(part) for part in reversed(exc.path)
        )
        return path, exc.reason
    return None


class _Unstorable(Exception):
    """Raised at the offending value; each container it passes adds its key or index."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str | int] = []


def _walk(container: dict[str, Any] | list[Any], depth: int) -> None:
    # Called for every container of a body of up to 256 KB: kept to one loop per container,
    # with the path built only on the way out of an error.
    if depth > MAX_JSON_DEPTH:
        raise _Unstorable(f"nested deeper than {MAX_JSON_DEPTH} levels")
    items: Any
    if isinstance(container, dict):
        for key in container:
            if _UNSTORABLE.search(key):
                raise _Unstorable(_unstorable_reason(key, "keys"))
        items = container.items()
    else:
        items = enumerate(container)
    for key, item in items:
        try:
            kind = type(item)  # decoded JSON: exactly str, dict, list, or a scalar
            if kind is str:
                if _UNSTORABLE.search(item):
                    raise _Unstorable(_unstorable_reason(item, "strings"))
            elif kind is dict or kind is list:
                _walk(item, depth + 1)
        except _Unstorable as exc:
            exc.path.append(key)
            raise


def _unstorable_reason(text: str, what: str) -> str:
    if "\x00" in text:
        return f"{what} must not contain NUL (\\u0000)"
    return f"{what} must not contain lone surrogates (\\ud800-\\udfff)"


def _key_path(key: str) -> str:
    if _IDENTIFIER.fullmatch(key):
        return f".{key}"
    shown = key if len(key) <= 32 else key[:32] + "..."
    return f"[{json.dumps(shown, ensure_ascii=False)}]"


class JsonBodyParser(BaseParser):
    """JSON bodies as the run core reads them, for every protocol's DRF views: a body over
    ``max_bytes``, not JSON, with numbers no peer can read back, nested too deep, or holding
    NUL or lone surrogates is each a ``ParseError`` (a 400 in the view's own error shape)
    naming the problem. An empty body is ``{}``, unless ``empty_body`` words its refusal."""

    media_type = "application/json"
    max_bytes = 1024 * 1024
    empty_body: str | None = None

    def parse(self, stream: IO[bytes], media_type: Any = None, parser_context: Any = None) -> Any:
        body = stream.read(self.max_bytes + 1) if stream is not None else b""
        if len(body) > self.max_bytes:
            raise ParseError(f"the body exceeds {self.max_bytes // 1024} KB")
        if not body.strip():
            if self.empty_body is not None:
                raise ParseError(self.empty_body)
            return {}
        try:
            value = json_decode(body)
        except MalformedJson as exc:
            raise ParseError(f"malformed JSON: {exc}") from None
        except JsonTooDeep:
            raise ParseError("malformed JSON: nested too deep") from None
        if isinstance(value, dict | list):
            place = json_unstorable_place(value)
            if place is not None:
                path, reason = place
                raise ParseError(f"invalid body{path}: {reason}")
        return value
