"""The tool contract: names, parameters and annotations are what prompts depend on.

A renamed tool or argument breaks every prompt that uses it, so changing one must be a
deliberate edit here.
"""

import re
from pathlib import Path

import pytest
from mcp import Client

from obsidian_mcp.server import build_server
from scripts.gen_tool_docs import effective_hints
from tests.conftest import folder_settings

# name -> (required parameters, optional parameters)
EXPECTED_PARAMETERS: dict[str, tuple[set[str], set[str]]] = {
    "vault_read_note": ({"path"}, {"heading", "offset", "max_chars", "format"}),
    "vault_peek_file": ({"path"}, {"format"}),
    "vault_tree": (set(), {"folder", "depth", "format"}),
    "vault_search_map": ({"query"}, {"folder", "format"}),
    "vault_scratch_append": ({"text"}, set()),
    "vault_semantic_query": (
        {"query"},
        {"limit", "include_context", "folder", "max_tokens", "concise", "format"},
    ),
    "vault_smart_search": (
        {"query"},
        {"limit", "snippet_length", "folder", "max_tokens", "concise", "format"},
    ),
    "vault_find_related": ({"path"}, {"limit", "concise", "format"}),
    "vault_quick_context": ({"topic"}, {"max_tokens", "format"}),
    # DESIGN.md: content and tags required; context, type, source, supersedes, scope and
    # occurred optional.
    "vault_remember": (
        {"content", "tags"},
        {"context", "type", "source", "supersedes", "scope", "occurred"},
    ),
    "vault_recall": (
        set(),
        {
            "tags",
            "match_all_tags",
            "query",
            "time_range",
            "since",
            "until",
            "type",
            "limit",
            "scope",
            "include_superseded",
            "max_tokens",
            "format",
        },
    ),
    "vault_forget": ({"id"}, set()),
    "vault_edit_note": (
        {"path", "operation"},
        {"target", "content", "version", "expected_count", "create_target", "dry_run", "force",
         "format"},
    ),
    "vault_undo_edit": ({"edit_id"}, {"format"}),
}

# Defaults DESIGN.md's tool table names, as the schema announces them to the model.
EXPECTED_DEFAULTS: dict[str, dict[str, object]] = {
    "vault_semantic_query": {"limit": 5},
    "vault_smart_search": {"limit": 10, "snippet_length": 200},
    "vault_find_related": {"limit": 5},
    "vault_tree": {"folder": "", "depth": 2},
    "vault_search_map": {"folder": ""},
    "vault_remember": {"context": None, "type": None, "source": None, "supersedes": None,
                       "scope": None, "occurred": None},
}
# A flag's default (off) and format's (markdown) are said once, in the instructions.
DEFAULTS_IN_INSTRUCTIONS = ("format='json'", "Flags are off unless set", "max_tokens (default")

# name -> (readOnly, destructive, idempotent, openWorld), as a client reads the hints sent
# (the specification's default for one left out; a read-only tool is neither destructive
# nor repeated with effect).
EXPECTED_ANNOTATIONS: dict[str, tuple[bool, bool, bool, bool]] = {
    # Reads change nothing and touch only the user's own vault (a closed world).
    "vault_read_note": (True, False, True, False),
    "vault_peek_file": (True, False, True, False),
    "vault_tree": (True, False, True, False),
    "vault_search_map": (True, False, True, False),
    "vault_semantic_query": (True, False, True, False),
    "vault_smart_search": (True, False, True, False),
    "vault_find_related": (True, False, True, False),
    "vault_quick_context": (True, False, True, False),
    "vault_recall": (True, False, True, False),
    # Appends a new entry each time, to its own note only.
    "vault_scratch_append": (False, False, False, False),
    # Writes to its own memory file; the same memory again writes nothing.
    "vault_remember": (False, False, True, False),
    # No tool brings a forgotten memory back, and compaction later erases it.
    "vault_forget": (False, True, True, False),
    # Replace, delete and replace_text remove the user's text; appending twice adds twice.
    "vault_edit_note": (False, True, False, False),
    "vault_undo_edit": (False, True, False, False),
}


@pytest.mark.anyio
async def test_tool_names_parameters_and_annotations(tmp_path: Path) -> None:
    settings = folder_settings(tmp_path, tmp_path / "config")
    async with Client(build_server(settings)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        resources = [r.uri for r in (await client.list_resources()).resources]
        templates = [
            t.uri_template for t in (await client.list_resource_templates()).resource_templates
        ]
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        instructions = client.instructions or ""
    assert set(tools) == set(EXPECTED_PARAMETERS) == set(EXPECTED_ANNOTATIONS)
    assert resources == ["obsidian://status"]
    assert templates == ["obsidian://memory/recent{?limit,vault}"]
    assert prompts == {"handover", "update-knowledge"}
    for name, (required, optional) in EXPECTED_PARAMETERS.items():
        schema = tools[name].input_schema
        assert set(schema.get("required", [])) == required, name
        assert set(schema["properties"]) == required | optional, name
    for name, expected in EXPECTED_ANNOTATIONS.items():
        annotations = tools[name].annotations
        assert annotations is not None, name
        assert effective_hints(annotations) == expected, name
    for name, defaults in EXPECTED_DEFAULTS.items():
        properties = tools[name].input_schema["properties"]
        assert {key: properties[key].get("default") for key in defaults} == defaults, name
    for said in DEFAULTS_IN_INSTRUCTIONS:
        assert said in instructions
    for tool in tools.values():
        # Short, but says what the tool gives (issue 19 trimmed every one to the point).
        assert tool.description and len(tool.description) > 50, tool.name
        # Docstring indentation is tokens every client pays for in every session.
        assert "\n " not in tool.description, tool.name
        for prop, spec in tool.input_schema["properties"].items():
            # An enum's values say what it takes (format: markdown or json); max_tokens is
            # explained once, in the instructions.
            assert spec.get("description") or spec.get("enum") or prop == "max_tokens", (
                f"{tool.name}.{prop}"
            )


def _limits(spec: dict[str, object]) -> list[object]:
    """The bounds a parameter's schema sets, whatever its type."""
    options = spec.get("anyOf")
    if isinstance(options, list):
        concrete = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
        spec = {**concrete[0], "description": spec.get("description")} if concrete else spec
    kind = spec.get("type")
    if kind == "string" and "enum" not in spec:
        return [spec.get("maxLength")]
    if kind == "array":
        return [spec.get("maxItems")]
    if kind == "integer":
        return [spec.get("minimum"), spec.get("maximum")]
    return []


@pytest.mark.anyio
async def test_every_argument_is_bounded_and_says_so(tmp_path: Path) -> None:
    """No argument may be unbounded (a 2 MB topic once answered 4 MB). The model reads the
    numeric ranges in the schema the tool list sends; the abuse limits (longest text, most
    items) are enforced and named in the refusal, but not listed; no description repeats a
    limit (every client pays for the definitions with every request)."""
    server = build_server(folder_settings(tmp_path, tmp_path / "config"))
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
    for tool in tools:
        full = server.full_schema(tool.name)["properties"]
        for prop, spec in tool.input_schema["properties"].items():
            assert "maxLength" not in spec and "maxItems" not in spec, f"{tool.name}.{prop}"
            assert "maxLength" not in spec.get("items", {}), f"{tool.name}.{prop}"
            if spec.get("type") == "integer":
                assert {"minimum", "maximum"} <= set(spec), f"{tool.name}.{prop} unlisted range"
            description = str(spec.get("description", ""))
            for limit in _limits(full[prop]):
                assert isinstance(limit, int), f"{tool.name}.{prop} has no limit"
                said = rf"(?<![\d,])({limit}|{limit:,})(?![\d,])"
                repeated = limit > 1 and re.search(said, description) is not None
                assert not repeated, f"{tool.name}.{prop}: {description!r} repeats {limit}"
