# pyright: strict
"""Pure text processing for notes: markdown structure, snippets and token estimates."""

from obsidian_mcp.text.markdown import (
    LinkResolver,
    Paragraph,
    ParsedNote,
    Section,
    WikiLink,
    find_section,
    gist,
    parse_note,
    plain_text,
)
from obsidian_mcp.text.snippets import (
    Snippet,
    cut_to_sentences,
    merge_spans,
    sentence_spans,
    snippet_around,
    snippets_for_matches,
    truncate_at_word,
)
from obsidian_mcp.text.tokens import estimate_tokens

__all__ = [
    "LinkResolver",
    "Paragraph",
    "ParsedNote",
    "Section",
    "Snippet",
    "WikiLink",
    "cut_to_sentences",
    "estimate_tokens",
    "find_section",
    "gist",
    "merge_spans",
    "parse_note",
    "plain_text",
    "sentence_spans",
    "snippet_around",
    "snippets_for_matches",
    "truncate_at_word",
]
