"""Frontmatter the way markdown-patch reads and writes it: the ``yaml`` npm package, v2.

markdown-patch parses a note's frontmatter with ``yaml``'s ``parse``/``parseDocument``
(YAML 1.2, *core* schema) and, for any frontmatter edit, regenerates the whole block
with ``yaml.stringify`` (markdown-patch ``src/patch.ts``
``regenerateDocumentWithFrontmatter``; 2.0 ``src/engine/frontmatter.ts``
``serializeBlock``). That is why a PATCH loses comments and quoting: what comes back
is ``stringify``'s own formatting.

* :func:`load` is PyYAML with the YAML 1.1 resolvers swapped for the 1.2 core ones:
  ``yes``/``on``/``2026-05-01`` stay strings, ``012`` is twelve, ``0o17`` octal,
  ``<<`` an ordinary key, and a duplicate key is an error (``yaml`` v2's
  ``uniqueKeys``). Syntax errors keep PyYAML's wording, not ``yaml``'s.
* :func:`stringify` re-states ``yaml`` v2.8's ``stringify`` (default options:
  ``lineWidth`` 80, ``minContentWidth`` 20, ``indentSeq``, plain scalars where
  possible, ``"double"`` quotes unless the string has ``"`` and no ``'``, block
  literals for multi-line strings, folding of long plain and quoted scalars) for the
  JSON values a frontmatter object holds; its files are ``src/stringify/
  stringifyString.ts``, ``foldFlowLines.ts``, ``stringifyPair.ts``,
  ``stringifyCollection.ts`` and ``stringifyNumber.ts``.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

import yaml

from .mdblocks import js_trim

LINE_WIDTH = 80
MIN_CONTENT_WIDTH = 20
DOUBLE_QUOTED_MIN_MULTILINE = 40


class YamlError(ValueError):
    """The frontmatter is not valid YAML 1.2 (or repeats a key)."""


class YamlUnsupported(ValueError):
    """YAML that ``yaml`` v2 reads but PyYAML cannot (a tab inside a plain scalar)."""


# --- loading -------------------------------------------------------------------------

_NULL = "tag:yaml.org,2002:null"
_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"


class _CoreLoader(yaml.SafeLoader):
    """SafeLoader resolving plain scalars by the YAML 1.2 core schema."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise yaml.constructor.ConstructorError(
                None, None, f"expected a mapping node, but found {node.id}", node.start_mark
            )
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _js_key(self.construct_object(key_node, deep=True))
            if key in mapping:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    "Map keys must be unique",
                    key_node.start_mark,
                )
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


_CoreLoader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in (
    (_NULL, r"^(?:~|null|Null|NULL)?$", ["~", "n", "N", ""]),
    (_BOOL, r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    (_INT, r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    (
        _FLOAT,
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+"
        r"|[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)|[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$",
        list("-+.0123456789"),
    ),
):
    _CoreLoader.add_implicit_resolver(_tag, re.compile(_pattern), _first)


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int | float:
    text = str(loader.construct_scalar(node))
    if text.startswith("0o"):
        value = int(text[2:], 8)
    elif text.startswith("0x"):
        value = int(text[2:], 16)
    else:
        value = int(text, 10)
    return value if abs(value) <= 2**53 else float(value)  # a JavaScript number


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node))
    lowered = text.lower()
    if lowered.endswith(".inf"):
        return -math.inf if text.startswith("-") else math.inf
    if lowered == ".nan":
        return math.nan
    return float(text)


def _construct_bool(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> bool:
    return str(loader.construct_scalar(node)).lower() == "true"


_CoreLoader.add_constructor(_INT, _construct_int)
_CoreLoader.add_constructor(_FLOAT, _construct_float)
_CoreLoader.add_constructor(_BOOL, _construct_bool)
_CoreLoader.add_constructor(_NULL, lambda loader, node: None)


def _construct_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


# A timestamp is not a core-schema type: an explicit ``!!timestamp`` reads as a string.
_CoreLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_text)


def load(text: str) -> Any:
    """``yaml.parse(text)``: None for an empty document; raises :class:`YamlError`."""
    try:
        return yaml.load(text, Loader=_CoreLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        message = str(exc).replace("\n", " ")
        if "found character '\\t' that cannot start any token" in message:
            raise YamlUnsupported(message) from exc
        raise YamlError(message) from exc


def _js_key(key: Any) -> str:
    """A map key as ``toJS`` (``mapAsMap: false``) turns it into an object key."""
    if isinstance(key, str):
        return key
    if key is None:
        return ""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int | float):
        return js_number(key)
    if isinstance(key, list):
        return ",".join("" if k is None else _js_key(k) for k in key)
    return "[object Object]"


# --- numbers -------------------------------------------------------------------------


def js_number(value: float) -> str:
    """``String(n)`` / ``JSON.stringify(n)`` for a JavaScript number."""
    if isinstance(value, bool):
        raise TypeError("not a number")
    if isinstance(value, int):
        if abs(value) <= 2**53:
            return str(value)
        value = float(value)
    if math.isnan(value) or math.isinf(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    digits_tuple = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(str(d) for d in digits_tuple.digits)
    exponent = int(digits_tuple.exponent)
    k, n = len(digits), len(digits) + exponent  # value = 0.digits * 10**n
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{sign}{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def _stringify_number(value: float) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        if value == 0 and math.copysign(1, value) < 0:
            return "-0"
    return js_number(value)


# --- folding (foldFlowLines.ts) ------------------------------------------------------

FOLD_FLOW, FOLD_BLOCK, FOLD_QUOTED = "flow", "block", "quoted"


def _consume_more_indented(text: str, i: int, indent: int) -> int:
    end = i
    start = i + 1
    ch = text[start] if start < len(text) else ""
    while ch in (" ", "\t") and ch:
        if i < start + indent:
            i += 1
            ch = text[i] if i < len(text) else ""
        else:
            while True:
                i += 1
                ch = text[i] if i < len(text) else ""
                if not ch or ch == "\n":
                    break
            end = i
            start = i + 1
            ch = text[start] if start < len(text) else ""
    return end


def _fold(
    text: str,
    indent: str,
    mode: str,
    indent_at_start: int | None,
    on_overflow: list[bool] | None = None,
) -> str:
    line_width, min_content = LINE_WIDTH, MIN_CONTENT_WIDTH
    end_step = max(1 + min_content, 1 + line_width - len(indent))
    if len(text) <= end_step:
        return text
    folds: list[int] = []
    escaped_folds: set[int] = set()
    end = line_width - len(indent)
    if indent_at_start is not None:
        if indent_at_start > line_width - max(2, min_content):
            folds.append(0)
        else:
            end = line_width - indent_at_start
    split: int | None = None
    prev: str | None = None
    overflow = False
    i = -1
    esc_start = esc_end = -1
    if mode == FOLD_BLOCK:
        i = _consume_more_indented(text, i, len(indent))
        if i != -1:
            end = i + end_step
    n = len(text)
    while True:
        i += 1
        if i >= n:
            break
        ch = text[i]
        if mode == FOLD_QUOTED and ch == "\\":
            esc_start = i
            nxt = text[i + 1] if i + 1 < n else ""
            i += {"x": 3, "u": 5, "U": 9}.get(nxt, 1)
            esc_end = i
        if ch == "\n":
            if mode == FOLD_BLOCK:
                i = _consume_more_indented(text, i, len(indent))
            end = i + len(indent) + end_step
            split = None
        else:
            if ch == " " and prev and prev not in (" ", "\n", "\t"):
                nxt = text[i + 1] if i + 1 < n else ""
                if nxt and nxt not in (" ", "\n", "\t"):
                    split = i
            if i >= end:
                if split:
                    folds.append(split)
                    end = split + end_step
                    split = None
                elif mode == FOLD_QUOTED:
                    while prev in (" ", "\t"):
                        prev = ch
                        i += 1
                        ch = text[i] if i < n else ""
                        overflow = True
                    j = i - 2 if i > esc_end + 1 else esc_start - 1
                    if j in escaped_folds:
                        return text
                    folds.append(j)
                    escaped_folds.add(j)
                    end = j + end_step
                    split = None
                else:
                    overflow = True
        prev = ch
    if overflow and on_overflow is not None:
        on_overflow.append(True)
    if not folds:
        return text
    res = text[: folds[0]]
    for k, fold in enumerate(folds):
        stop = folds[k + 1] if k + 1 < len(folds) and folds[k + 1] else len(text)
        if fold == 0:
            res = f"\n{indent}{text[:stop]}"
        else:
            if mode == FOLD_QUOTED and fold in escaped_folds:
                res += f"{text[fold]}\\"
            res += f"\n{indent}{text[fold + 1 : stop]}"
    return res


# --- strings (stringifyString.ts) ----------------------------------------------------


class _Ctx:
    def __init__(
        self,
        indent: str = "",
        implicit_key: bool = False,
        indent_at_start: int | None = None,
    ) -> None:
        self.indent = indent
        self.implicit_key = implicit_key
        self.indent_at_start = indent_at_start
        self.force_block_indent = False

    def copy(self, **changes: Any) -> _Ctx:
        new = _Ctx(self.indent, self.implicit_key, self.indent_at_start)
        new.force_block_indent = self.force_block_indent
        for name, value in changes.items():
            setattr(new, name, value)
        return new


_INDENT_STEP = "  "
_DOC_MARKER = re.compile(r"^(%|---|\.\.\.)", re.M)
_CORE_TESTS = [
    re.compile(r"(?:~|[Nn]ull|NULL)?\Z"),
    re.compile(r"(?:[Tt]rue|TRUE|[Ff]alse|FALSE)\Z"),
    re.compile(r"0o[0-7]+\Z"),
    re.compile(r"[-+]?[0-9]+\Z"),
    re.compile(r"0x[0-9a-fA-F]+\Z"),
    re.compile(r"(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)\Z"),
    re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+\Z"),
    re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)\Z"),
]
_PLAIN_FORBIDDEN = re.compile(
    r"\A[\n\t ,\[\]{}#&*!|>'\"%@`]|\A[?-]\Z|\A[?-][ \t]|[\n:][ \t]|[ \t]\n|[\n\t ]#|[\n\t :]\Z"
)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _json_string(value: str) -> str:
    """``JSON.stringify`` of a string (control characters as lower-case escapes)."""
    return json.dumps(value, ensure_ascii=False)


def _double_quoted(value: str, ctx: _Ctx) -> str:
    js = _json_string(value)
    indent = ctx.indent or ("  " if _DOC_MARKER.search(value) else "")
    out = ""
    start = 0
    i = 0
    n = len(js)
    while i < n:
        ch = js[i]
        if ch == " " and js[i + 1 : i + 3] == "\\n":
            out += js[start:i] + "\\ "
            i += 1
            start = i
            ch = "\\"
        if ch == "\\":
            nxt = js[i + 1] if i + 1 < n else ""
            if nxt == "u":
                out += js[start:i]
                code = js[i + 2 : i + 6]
                named = {
                    "0000": "\\0",
                    "0007": "\\a",
                    "000b": "\\v",
                    "001b": "\\e",
                    "0085": "\\N",
                    "00a0": "\\_",
                    "2028": "\\L",
                    "2029": "\\P",
                }
                if code in named:
                    out += named[code]
                elif code[:2] == "00":
                    out += "\\x" + code[2:]
                else:
                    out += js[i : i + 6]
                i += 5
                start = i + 1
            elif nxt == "n":
                if ctx.implicit_key or js[i + 2 : i + 3] == '"' or n < DOUBLE_QUOTED_MIN_MULTILINE:
                    i += 1
                else:
                    out += js[start:i] + "\n\n"
                    while js[i + 2 : i + 4] == "\\n" and js[i + 4 : i + 5] != '"':
                        out += "\n"
                        i += 2
                    out += indent
                    if js[i + 2 : i + 3] == " ":
                        out += "\\"
                    i += 1
                    start = i + 1
            else:
                i += 1
        i += 1
    out = out + js[start:] if start else js
    if ctx.implicit_key:
        return out
    return _fold(out, indent, FOLD_QUOTED, ctx.indent_at_start)


def _single_quoted(value: str, ctx: _Ctx) -> str:
    if (ctx.implicit_key and "\n" in value) or re.search(r"[ \t]\n|\n[ \t]", value):
        return _double_quoted(value, ctx)
    indent = ctx.indent or ("  " if _DOC_MARKER.search(value) else "")
    res = "'" + re.sub(r"\n+", lambda m: f"{m.group(0)}\n{indent}", value.replace("'", "''")) + "'"
    if ctx.implicit_key:
        return res
    return _fold(res, indent, FOLD_FLOW, ctx.indent_at_start)


def _quoted(value: str, ctx: _Ctx) -> str:
    has_double, has_single = '"' in value, "'" in value
    if has_double and not has_single:
        return _single_quoted(value, ctx)
    return _double_quoted(value, ctx)


def _line_length_over_limit(value: str, indent_length: int) -> bool:
    limit = LINE_WIDTH - indent_length
    n = len(value)
    if n <= limit:
        return False
    start = 0
    for i, ch in enumerate(value):
        if ch == "\n":
            if i - start > limit:
                return True
            start = i + 1
            if n - start <= limit:
                return False
    return True


def _block(value: str, ctx: _Ctx) -> str:
    if re.search(r"\n[\t ]+\Z", value):
        return _quoted(value, ctx)
    indent = ctx.indent or ("  " if ctx.force_block_indent or _DOC_MARKER.search(value) else "")
    literal = not _line_length_over_limit(value, len(indent))
    if not value:
        return "|\n" if literal else ">\n"
    end_start = len(value)
    while end_start > 0 and value[end_start - 1] in ("\n", "\t", " "):
        end_start -= 1
    end = value[end_start:]
    end_nl = end.find("\n")
    if end_nl == -1:
        chomp = "-"
    elif value == end or end_nl != len(end) - 1:
        chomp = "+"
    else:
        chomp = ""
    if end:
        value = value[: -len(end)]
        if end.endswith("\n"):
            end = end[:-1]
        end = re.sub(r"(\A|(?<!\n))\n+(?!\n|\Z)", lambda m: m.group(0) + indent, end)
    start_with_space = False
    start_nl = -1
    start_end = 0
    while start_end < len(value):
        ch = value[start_end]
        if ch == " ":
            start_with_space = True
        elif ch == "\n":
            start_nl = start_end
        else:
            break
        start_end += 1
    start = value[: start_nl + 1 if start_nl < start_end else start_end]
    if start:
        value = value[len(start) :]
        start = re.sub(r"\n+", lambda m: m.group(0) + indent, start)
    indent_size = "2" if indent else "1"
    header = (indent_size if start_with_space else "") + chomp
    if not literal:
        folded = re.sub(r"\n+", lambda m: "\n" + m.group(0), value)
        folded = re.sub(
            r"(?:\A|\n)([\t ].*)(?:([\n\t ]*)\n(?![\n\t ]))?",
            lambda m: m.group(1) + (m.group(2) or ""),
            folded,
        )
        folded = re.sub(r"\n+", lambda m: m.group(0) + indent, folded)
        overflow: list[bool] = []
        body = _fold(f"{start}{folded}{end}", indent, FOLD_BLOCK, len(ctx.indent), overflow)
        if not overflow:
            return f">{header}\n{indent}{body}"
    value = re.sub(r"\n+", lambda m: m.group(0) + indent, value)
    return f"|{header}\n{indent}{start}{value}{end}"


def _plain(value: str, ctx: _Ctx) -> str:
    implicit_key, indent = ctx.implicit_key, ctx.indent
    if implicit_key and "\n" in value:
        return _quoted(value, ctx)
    if _PLAIN_FORBIDDEN.search(value):
        return _quoted(value, ctx) if implicit_key or "\n" not in value else _block(value, ctx)
    if not implicit_key and "\n" in value:
        return _block(value, ctx)
    if _DOC_MARKER.search(value):
        if indent == "":
            ctx.force_block_indent = True
            return _block(value, ctx)
        if implicit_key and indent == _INDENT_STEP:
            return _quoted(value, ctx)
    text = re.sub(r"\n+", lambda m: f"{m.group(0)}\n{indent}", value)
    if any(test.match(text) for test in _CORE_TESTS):
        return _quoted(value, ctx)
    if implicit_key:
        return text
    return _fold(text, indent, FOLD_FLOW, ctx.indent_at_start)


def _string(value: str, ctx: _Ctx) -> str:
    if _CONTROL.search(value):
        return _double_quoted(value, ctx)
    return _plain(value, ctx)


# --- collections (stringifyPair.ts, stringifyCollection.ts) -------------------------


def _node(value: Any, ctx: _Ctx) -> str:
    if isinstance(value, dict):
        return _map(value, ctx)
    if isinstance(value, list):
        return _seq(value, ctx)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _stringify_number(value)
    return _string(str(value), ctx)


def js_key_order(value: dict[str, Any]) -> list[str]:
    """A JavaScript object's own-key order: array-index keys (``"0"``, ``"5"``) first,
    ascending, then the others in insertion order. markdown-patch builds plain objects,
    so ``{title: 1, "2026": 2}`` is written ``"2026"`` first."""
    indices = [k for k in value if re.fullmatch(r"0|[1-9][0-9]*", k) and int(k) < 2**32 - 1]
    indices.sort(key=int)
    return indices + [k for k in value if k not in set(indices)]


def _map(value: dict[str, Any], ctx: _Ctx) -> str:
    if not value:
        return "{}"
    item_ctx = ctx.copy()
    lines = [_pair(key, value[key], item_ctx) for key in js_key_order(value)]
    return ("\n" + ctx.indent).join(lines)


def _seq(value: list[Any], ctx: _Ctx) -> str:
    if not value:
        return "[]"
    item_ctx = ctx.copy(indent=ctx.indent + "  ")
    lines = ["- " + _node(item, item_ctx) for item in value]
    return ("\n" + ctx.indent).join(lines)


def _pair(key: str, value: Any, ctx: _Ctx) -> str:
    pair_ctx = ctx.copy(implicit_key=True, indent=ctx.indent + _INDENT_STEP)
    text = _string(key, pair_ctx) + ":"
    pair_ctx.implicit_key = False
    is_collection = isinstance(value, dict | list)
    if not is_collection:
        pair_ctx.indent_at_start = len(text) + 1
    value_text = _node(value, pair_ctx)
    if is_collection and value:
        ws = "\n" + pair_ctx.indent
    elif value_text == "" or value_text.startswith("\n"):
        ws = ""
    else:
        ws = " "
    return text + ws + value_text


def stringify(value: dict[str, Any]) -> str:
    """``yaml.stringify(value)`` for a frontmatter object (keys in insertion order)."""
    return _node(value, _Ctx()) + "\n"


__all__ = [
    "YamlError",
    "YamlUnsupported",
    "js_key_order",
    "js_number",
    "js_trim",
    "load",
    "stringify",
]
