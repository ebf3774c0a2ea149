"""What Obsidian's metadata cache extracts from one note, approximated.

* Frontmatter: a leading ``---`` line up to the next ``---`` line, parsed as YAML with
  timestamps left as strings (Obsidian's parser does not make dates); anything that is
  not a mapping, or fails to parse, gives ``{}``.
* Inline tags: ``#tag`` preceded by start-of-text or whitespace, made of characters other
  than whitespace and ASCII punctuation except ``_ - /``, not all digits; never inside
  frontmatter, fenced code blocks or inline code spans.
* Links: wikilinks and embeds ``[[target#sub|alias]]`` and markdown links
  ``[text](target)`` (percent-decoded; URLs with a scheme skipped), in document order,
  outside frontmatter and code. Frontmatter property links are not collected (newer
  Obsidian does); that is a deliberate simplification.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

import yaml

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _FrontmatterLoader(_BaseLoader):
    """SafeLoader (libyaml when present) without the timestamp resolver, so
    ``2026-05-01`` stays a string."""


_FrontmatterLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INLINE_CODE_RE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_TAG_RE = re.compile(r"(?<!\S)#([^\s!-,.:-@\[-^`{-~]+)")
_WIKILINK_RE = re.compile(r"!?\[\[([^\[\]|#^]*)(?:[#^][^\[\]|]*)?(?:\|[^\[\]]*)?\]\]")
_MDLINK_RE = re.compile(r"!?\[[^\[\]]*\]\(\s*(<[^>]*>|[^()\s]+)(?:\s+\"[^\"]*\")?\s*\)")
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class NoteMetadata:
    """Parsed metadata of one markdown file (content not kept)."""

    frontmatter: dict[str, Any]
    #: The frontmatter ``tags`` list's strings, as note JSON reports them first.
    frontmatter_tag_list: list[str]
    #: Every tag occurrence as Obsidian's ``getAllTags`` counts them (no ``#``).
    all_tags: list[str]
    #: Inline tag occurrences in document order (no ``#``).
    inline_tags: list[str]
    #: Link paths (no ``#subpath``) in document order, duplicates kept.
    links: list[str]


def frontmatter_end(content: str) -> int:
    """Offset just past the closing ``---`` line, or 0 when there is no frontmatter."""
    if not content.startswith("---"):
        return 0
    first_nl = content.find("\n")
    if first_nl == -1 or content[:first_nl].rstrip() != "---":
        return 0
    pos = first_nl + 1
    while pos <= len(content):
        nl = content.find("\n", pos)
        line_end = len(content) if nl == -1 else nl
        if content[pos:line_end].rstrip() == "---":
            return len(content) if nl == -1 else nl + 1
        if nl == -1:
            return 0
        pos = nl + 1
    return 0


def parse_frontmatter(content: str) -> dict[str, Any]:
    end = frontmatter_end(content)
    if not end:
        return {}
    body = content[content.find("\n") + 1 : end]  # YAML lines plus the closing "---" line
    block = body[: body.rstrip("\n").rfind("\n") + 1]
    try:
        data = yaml.load(block, Loader=_FrontmatterLoader)
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


def _mask(text: str, start: int, end: int) -> str:
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def prose_only(content: str) -> str:
    """``content`` with frontmatter and code blanked out (same length, newlines kept)."""
    text = _mask(content, 0, frontmatter_end(content))
    lines = text.split("\n")
    fence: str | None = None
    for i, line in enumerate(lines):
        m = _FENCE_RE.match(line)
        if fence is None:
            if m:
                fence = m.group(1)
                lines[i] = " " * len(line)
        else:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            lines[i] = " " * len(line)
    text = "\n".join(lines)
    return _INLINE_CODE_RE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _frontmatter_tags(frontmatter: dict[str, Any]) -> list[str]:
    """Tags from ``tags``/``tag`` as Obsidian's ``parseFrontMatterTags`` reads them."""
    found: list[str] = []
    for key in ("tags", "tag"):
        value = frontmatter.get(key)
        items: list[Any] = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, str):
                found += [t.lstrip("#") for t in re.split(r"[,\s]+", item) if t.lstrip("#")]
    return found


def link_path(raw: str) -> str | None:
    """The vault-side path of a markdown link target, or None for URLs and anchors."""
    target = raw[1:-1] if raw.startswith("<") and raw.endswith(">") else raw
    if _SCHEME_RE.match(target):
        return None
    target = urllib.parse.unquote(target.split("#", 1)[0])
    return target or None


def parse_note(content: str) -> NoteMetadata:
    frontmatter = parse_frontmatter(content)
    raw_tags = frontmatter.get("tags")
    tag_list = [t for t in raw_tags if isinstance(t, str)] if isinstance(raw_tags, list) else []
    prose = prose_only(content)
    inline = [m.group(1) for m in _TAG_RE.finditer(prose) if not m.group(1).isdigit()]
    found: list[tuple[int, str]] = []
    for m in _WIKILINK_RE.finditer(prose):
        target = m.group(1).strip()
        if target:
            found.append((m.start(), target))
    for m in _MDLINK_RE.finditer(prose):
        target = link_path(m.group(1))
        if target:
            found.append((m.start(), target))
    found.sort()
    return NoteMetadata(
        frontmatter=frontmatter,
        frontmatter_tag_list=tag_list,
        all_tags=_frontmatter_tags(frontmatter) + inline,
        inline_tags=inline,
        links=[target for _, target in found],
    )
