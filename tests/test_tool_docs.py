"""docs/tools.md and the README's tool table are what the server's tool list says.

Regenerate them with `python -m scripts.gen_tool_docs` after changing a tool."""

from scripts.gen_tool_docs import REFERENCE, TABLE_START, expected_files


def test_tool_docs_match_the_code() -> None:
    expected = expected_files()
    stale = [p.name for p, text in expected.items() if p.read_text("utf-8") != text]
    assert not stale, f"{stale} stale: run python -m scripts.gen_tool_docs"
    reference = expected[REFERENCE]
    for name in ("vault_semantic_query", "vault_remember", "vault_forget"):
        assert f"## `{name}`" in reference
    assert "| `context` | string | optional |" in reference  # remember's context is optional
    assert any(TABLE_START in text for text in expected.values())
