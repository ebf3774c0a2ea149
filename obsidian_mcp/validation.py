"""A pydantic validation failure as the sentences a reader acts on: which value, what it
must be, what was given (a short excerpt, never the raw dump with its documentation URL).
"""

from typing import Any, cast

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from obsidian_mcp.limits import excerpt

Schema = dict[str, Any]


def _number(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _expected(schema: Schema) -> str:
    """What a parameter's JSON schema accepts, in words."""
    options = cast(list[Schema], schema.get("anyOf", []))
    if options:
        concrete = [option for option in options if option.get("type") != "null"]
        if len(concrete) == 1:
            return _expected(concrete[0]) + " (or null)"
    if "enum" in schema:
        return "one of " + ", ".join(repr(value) for value in schema["enum"])
    kind = schema.get("type")
    if kind == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and high is not None:
            return f"a whole number between {_number(low)} and {_number(high)}"
        if low is not None:
            return f"a whole number of at least {_number(low)}"
        return "a whole number"
    if kind == "boolean":
        return "true or false"
    if kind == "string":
        most = schema.get("maxLength")
        return f"text of at most {_number(most)} characters" if most is not None else "text"
    if kind == "array":
        most = schema.get("maxItems")
        items = _expected(cast(Schema, schema.get("items", {})))
        count = f"at most {_number(most)} items" if most is not None else "items"
        return f"a list of {count}, each {items}"
    return "a valid value"


def _parameter_schema(model_schema: Schema, name: str) -> Schema:
    return cast(Schema, cast(Schema, model_schema.get("properties", {})).get(name, {}))


def describe_error(error: ErrorDetails, model_schema: Schema, prefix: str = "") -> str:
    """One pydantic error as one sentence: the argument, what it must be, what was given.
    `prefix` turns a field name into the name the reader knows (OBSIDIAN_ for settings)."""
    location = [str(part) for part in error["loc"]]
    field = location[0] if location else "an argument"
    schema = _parameter_schema(model_schema, field)
    name = prefix + field.upper() if prefix else field
    given = error.get("input")
    kind = error["type"]
    if kind == "missing":
        return f"{name} is required; add it ({_expected(schema)})."
    if kind == "value_error":
        # A validator's own sentence, which names what is accepted (OBSIDIAN_TOOLS).
        return f"{name}: {error.get('ctx', {}).get('error', error['msg'])}"
    if len(location) > 1 and location[1].isdigit():
        item = cast(Schema, schema.get("items", {}))
        for option in cast(list[Schema], schema.get("anyOf", [])):
            item = cast(Schema, option.get("items", item))
        return f"{name}[{location[1]}] must be {_expected(item)}; you gave {excerpt(given)}."
    if kind == "string_too_long" and isinstance(given, str):
        return (
            f"{name} is {len(given):,} characters long; the limit is "
            f"{_number(error.get('ctx', {}).get('max_length'))}. Shorten it."
        )
    if kind == "string_too_short" and isinstance(given, str):
        return f"{name} is empty; give {_expected(schema)}."
    if kind == "too_long" and isinstance(given, list):
        most = error.get("ctx", {}).get("max_length")
        return f"{name} has {len(cast(list[object], given)):,} items; give at most {most}."
    return f"{name} must be {_expected(schema)}; you gave {excerpt(given)}."


def describe_invalid_arguments(exc: ValidationError, model_schema: Schema, prefix: str = "") -> str:
    """Every distinct problem, one sentence each (the first three, which is enough to fix)."""
    sentences = list(
        dict.fromkeys(describe_error(error, model_schema, prefix) for error in exc.errors())
    )
    more = len(sentences) - 3
    tail = f" ({more} more argument problems after these.)" if more > 0 else ""
    return " ".join(sentences[:3]) + tail
