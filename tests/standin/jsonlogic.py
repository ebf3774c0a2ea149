"""A small JsonLogic evaluator following json-logic-js 2.x, plus the plugin's extras.

Supported: ``var`` (dotted paths, array indexes, default), ``missing``, ``missing_some``,
``if``/``?:``, ``==``, ``===``, ``!=``, ``!==``, ``!``, ``!!``, ``and``, ``or``, ``<``, ``>``,
``<=``, ``>=`` (3-argument "between" forms too), ``in`` (substring or array member),
``cat``, ``substr``, ``+ - * / %``, ``min``, ``max``, ``merge``, ``map``, ``filter``,
``all``, ``some``, ``none``, ``reduce``; and the plugin's ``glob: [pattern, value]``
(glob-to-regexp defaults: only ``*`` is a wildcard, anchored) and
``regexp: [pattern, value]`` (unanchored search). Loose equality and comparisons follow
JavaScript coercion for JSON values. An unknown operator raises :class:`JsonLogicError`,
as json-logic-js throws "Unrecognized operation".
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any


class JsonLogicError(Exception):
    pass


def truthy(value: Any) -> bool:
    """json-logic-js ``truthy``: JavaScript truthiness, except ``[]`` is false."""
    if isinstance(value, list):
        return len(value) > 0
    if isinstance(value, float) and math.isnan(value):
        return False
    return value is not None and value is not False and value != 0 and value != ""


def to_js_string(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, list):
        return ",".join("" if v is None else to_js_string(v) for v in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


def to_number(value: Any) -> float:
    if value is None or value is False:
        return 0.0
    if value is True:
        return 1.0
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list | dict):
        return to_number(to_js_string(value))
    text = str(value).strip()
    if not text:
        return 0.0
    try:
        return float(int(text, 0)) if text.lower().startswith(("0x", "0o", "0b")) else float(text)
    except ValueError:
        return math.nan


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def strict_equals(a: Any, b: Any) -> bool:
    if _is_number(a) and _is_number(b):
        return float(a) == float(b)
    if isinstance(a, list | dict) or isinstance(b, list | dict):
        return a is b
    return type(a) is type(b) and a == b


def loose_equals(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list | dict) and isinstance(b, list | dict):
        return a is b
    if isinstance(a, list | dict):
        a = to_js_string(a)
    if isinstance(b, list | dict):
        b = to_js_string(b)
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return to_number(a) == to_number(b)


def _less(a: Any, b: Any, *, or_equal: bool) -> bool:
    if isinstance(a, list | dict):
        a = to_js_string(a)
    if isinstance(b, list | dict):
        b = to_js_string(b)
    if isinstance(a, str) and isinstance(b, str):
        return a <= b if or_equal else a < b
    x, y = to_number(a), to_number(b)
    return x <= y if or_equal else x < y


def _var(data: Any, path: Any = None, default: Any = None) -> Any:
    if path is None or path == "" or path == []:
        return data
    current = data
    for key in to_js_string(path).split("."):
        if isinstance(current, dict) and key in current:
            current = current[key]
        elif isinstance(current, list) and key.isdigit() and int(key) < len(current):
            current = current[int(key)]
        else:
            return default
    return current


def _glob(pattern: Any, value: Any) -> bool:
    if not (isinstance(pattern, str) and isinstance(value, str)):
        return False
    regex = "".join(".*" if ch == "*" else re.escape(ch) for ch in pattern)
    return re.fullmatch(regex, value, re.S) is not None


def _regexp(pattern: Any, value: Any) -> bool:
    if not (isinstance(pattern, str) and isinstance(value, str)):
        return False
    try:
        return re.search(pattern, value) is not None
    except re.error as exc:
        raise JsonLogicError(f"Invalid regular expression: /{pattern}/: {exc}") from exc


def _number_result(value: float) -> int | float:
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def _minus(*a: Any) -> float:
    return -to_number(a[0]) if len(a) == 1 else to_number(a[0]) - to_number(a[1])


def _divide(a: Any, b: Any) -> float:
    y = to_number(b)
    x = to_number(a)
    if y == 0:
        return math.nan if x == 0 or math.isnan(x) else math.copysign(math.inf, x)
    return x / y


def _modulo(a: Any, b: Any) -> float:
    y = to_number(b)
    return math.nan if y == 0 else math.fmod(to_number(a), y)


def _substr(source: Any, start: Any, length: Any = None) -> str:
    text = to_js_string(source)
    begin = int(to_number(start))
    begin = max(len(text) + begin, 0) if begin < 0 else begin
    if length is None:
        return text[begin:]
    n = int(to_number(length))
    return text[begin : len(text) + n] if n < 0 else text[begin : begin + n]


def _in(needle: Any, haystack: Any) -> bool:
    if isinstance(haystack, str):
        return to_js_string(needle) in haystack
    if isinstance(haystack, list):
        return any(strict_equals(needle, item) for item in haystack)
    return False


def _missing(data: Any, *keys: Any) -> list[Any]:
    wanted = keys[0] if len(keys) == 1 and isinstance(keys[0], list) else list(keys)
    return [k for k in wanted if _var(data, k) in (None, "")]


_SIMPLE: dict[str, Callable[..., Any]] = {
    "==": lambda a=None, b=None: loose_equals(a, b),
    "===": lambda a=None, b=None: strict_equals(a, b),
    "!=": lambda a=None, b=None: not loose_equals(a, b),
    "!==": lambda a=None, b=None: not strict_equals(a, b),
    "!": lambda a=None, *_: not truthy(a),
    "!!": lambda a=None, *_: truthy(a),
    ">": lambda a=None, b=None: _less(b, a, or_equal=False),
    ">=": lambda a=None, b=None: _less(b, a, or_equal=True),
    "<": lambda a=None, b=None, c=None: (
        _less(a, b, or_equal=False)
        if c is None
        else _less(a, b, or_equal=False) and _less(b, c, or_equal=False)
    ),
    "<=": lambda a=None, b=None, c=None: (
        _less(a, b, or_equal=True)
        if c is None
        else _less(a, b, or_equal=True) and _less(b, c, or_equal=True)
    ),
    "in": _in,
    "cat": lambda *a: "".join(to_js_string(v) for v in a),
    "substr": _substr,
    "+": lambda *a: _number_result(sum(to_number(v) for v in a)),
    "*": lambda *a: _number_result(math.prod(to_number(v) for v in a)),
    "-": lambda *a: _number_result(_minus(*a)),
    "/": lambda a, b: _number_result(_divide(a, b)),
    "%": lambda a, b: _number_result(_modulo(a, b)),
    "min": lambda *a: _number_result(min(to_number(v) for v in a)) if a else None,
    "max": lambda *a: _number_result(max(to_number(v) for v in a)) if a else None,
    "merge": lambda *a: [x for v in a for x in (v if isinstance(v, list) else [v])],
    "glob": _glob,
    "regexp": _regexp,
}


def apply(logic: Any, data: Any) -> Any:
    """Evaluate ``logic`` against ``data``."""
    if isinstance(logic, list):
        return [apply(item, data) for item in logic]
    if not isinstance(logic, dict) or len(logic) != 1:
        return logic
    op, raw = next(iter(logic.items()))
    args: list[Any] = raw if isinstance(raw, list) else [raw]

    if op in ("if", "?:"):
        i = 0
        while i < len(args) - 1:
            if truthy(apply(args[i], data)):
                return apply(args[i + 1], data)
            i += 2
        return apply(args[i], data) if i < len(args) else None
    if op in ("and", "or"):
        value: Any = None
        for arg in args:
            value = apply(arg, data)
            if truthy(value) != (op == "and"):
                return value
        return value
    if op in ("map", "filter", "all", "some", "none", "reduce"):
        return _array_op(op, args, data)

    values = [apply(arg, data) for arg in args]
    if op == "var":
        return _var(data, *values[:2])
    if op == "missing":
        return _missing(data, *values)
    if op == "missing_some":
        need, keys = values[0], values[1]
        absent = _missing(data, keys)
        return [] if len(keys) - len(absent) >= need else absent
    if op in _SIMPLE:
        try:
            return _SIMPLE[op](*values)
        except TypeError as exc:
            raise JsonLogicError(f"Bad arguments for operation: {op}") from exc
    raise JsonLogicError(f"Unrecognized operation {op}")


def _array_op(op: str, args: list[Any], data: Any) -> Any:
    items = apply(args[0], data) if args else None
    if not isinstance(items, list):
        items = []
    logic = args[1] if len(args) > 1 else None
    if op == "map":
        return [apply(logic, item) for item in items]
    if op == "filter":
        return [item for item in items if truthy(apply(logic, item))]
    if op == "all":
        return bool(items) and all(truthy(apply(logic, item)) for item in items)
    if op == "some":
        return any(truthy(apply(logic, item)) for item in items)
    if op == "none":
        return not any(truthy(apply(logic, item)) for item in items)
    acc = apply(args[2], data) if len(args) > 2 else None
    for item in items:
        acc = apply(logic, {"current": item, "accumulator": acc})
    return acc
