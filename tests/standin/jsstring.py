"""JavaScript string semantics the plugin's answers carry.

Obsidian's offsets (simple search ``start``/``end``, ``context`` slices) count UTF-16
code units, and ``Array.prototype.sort`` compares code units. Python strings count code
points, so text is first "expanded": every astral character becomes its two surrogate
code points, after which Python indexing equals JavaScript indexing. :func:`dumps`
serialises like ``JSON.stringify(value, null, 2)``: surrogate pairs are rejoined and a
lone surrogate (a slice that cut a pair) is written as a ``\\uXXXX`` escape.
"""

from __future__ import annotations

import json
import math
import re
from json.encoder import encode_basestring as encode_string  # type: ignore[attr-defined]
from typing import cast

_ASTRAL_RE = re.compile(r"[\U00010000-\U0010FFFF]")
_LONE_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")


def _pair(m: re.Match[str]) -> str:
    cp = ord(m.group()) - 0x10000
    return chr(0xD800 + (cp >> 10)) + chr(0xDC00 + (cp & 0x3FF))


def utf16_units(text: str) -> str:
    """``text`` with astral characters split into surrogate pairs (JS indexing)."""
    return _ASTRAL_RE.sub(_pair, text)


def code_unit_key(text: str) -> bytes:
    """Sort key equal to JavaScript's default string comparison."""
    return text.encode("utf-16-be", "surrogatepass")


def js_lower(text: str) -> str:
    """Lower-case without changing the length (so offsets stay valid)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _finite(value: object) -> object:
    """JSON.stringify writes NaN and Infinity as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def _pretty(value: object, indent: str, out: list[str]) -> bool:
    """Append ``json.dumps(_finite(value), indent=2, ensure_ascii=False)`` pieces to
    ``out`` at nesting ``indent``; False when a value needs the stdlib path."""
    kind = type(value)
    if kind is str:
        out.append(encode_string(cast(str, value)))
    elif kind is dict:
        if not value:
            out.append("{}")
            return True
        inner = indent + "  "
        sep = "{\n" + inner
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                return False
            out.append(sep)
            out.append(encode_string(key))
            out.append(": ")
            t = type(item)
            if t is str:
                out.append(encode_string(item))
            elif t is int:
                out.append(int.__repr__(item))
            elif not _pretty(item, inner, out):
                return False
            sep = ",\n" + inner
        out.append("\n" + indent + "}")
    elif kind is list:
        if not value:
            out.append("[]")
            return True
        inner = indent + "  "
        sep = "[\n" + inner
        for item in value:  # type: ignore[attr-defined]
            out.append(sep)
            if type(item) is str:
                out.append(encode_string(item))
            elif not _pretty(item, inner, out):
                return False
            sep = ",\n" + inner
        out.append("\n" + indent + "]")
    elif kind is int:
        out.append(int.__repr__(value))  # type: ignore[arg-type]
    elif kind is float:
        out.append(float.__repr__(value) if math.isfinite(value) else "null")  # type: ignore[arg-type]
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    else:
        return False
    return True


def pretty(value: object) -> str:
    """``json.dumps(_finite(value), indent=2, ensure_ascii=False)``, faster.

    A pretty-printed fragment can be re-indented by replacing ``"\\n"`` (JSON strings
    never hold a raw newline), which callers use to splice cached fragments."""
    out: list[str] = []
    if _pretty(value, "", out):
        return "".join(out)
    return json.dumps(_finite(value), indent=2, ensure_ascii=False)


def finish(text: str) -> bytes:
    """UTF-8 bytes of pretty JSON text, with surrogates as ``JSON.stringify`` writes them."""
    if _LONE_SURROGATE_RE.search(text) is None:
        return text.encode("utf-8")
    text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    text = _LONE_SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text.encode("utf-8")


def dumps(value: object) -> bytes:
    """UTF-8 bytes of ``JSON.stringify(value, null, 2)``."""
    return finish(pretty(value))


def dumps_reference(value: object) -> bytes:
    """The straightforward form of :func:`dumps` (kept to test the fast one against)."""
    text = json.dumps(_finite(value), indent=2, ensure_ascii=False)
    text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    text = _LONE_SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text.encode("utf-8")
