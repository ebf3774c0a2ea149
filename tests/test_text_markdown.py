"""Note parsing: frontmatter, sections, blocks, links, tags, lookups and gists."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from obsidian_mcp.text.markdown import (
    Block,
    LinkResolver,
    ParsedNote,
    Section,
    WikiLink,
    find_section,
    gist,
    heading_reference,
    parse_note,
    parse_structure,
    plain_text,
    split_heading_reference,
)
from obsidian_mcp.text.tokens import estimate_tokens


def parse(content: str, path: str = "Folder/Note.md") -> ParsedNote:
    return parse_note(path, content)


def heading_text(note: ParsedNote, section: Section) -> str:
    return note.content[section.start : section.body_start]


# --- tokens -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"), [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 400, 100)]
)
def test_estimate_tokens(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


# --- frontmatter --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "frontmatter", "has_error", "body"),
    [
        ("---\ntitle: A\n---\nBody", {"title": "A"}, False, "Body"),
        ("---\r\ntitle: A\r\n---\r\nBody", {"title": "A"}, False, "Body"),
        ("---\n---\nBody", {}, False, "Body"),
        ("---\ntitle: A\n---", {"title": "A"}, False, ""),
        ("---\ntitle: A\n--- \nBody", {"title": "A"}, False, "Body"),
        # No closing line: not frontmatter at all, the whole file is body.
        ("---\ntitle: A\nBody", {}, False, "---\ntitle: A\nBody"),
        # Must be the very first line.
        ("\n---\ntitle: A\n---\nBody", {}, False, "\n---\ntitle: A\n---\nBody"),
        ("---\ntags: [a, b\n---\nBody", {}, True, "Body"),
        ("---\n- a\n- b\n---\nBody", {}, True, "Body"),
        ("---\njust text\n---\nBody", {}, True, "Body"),
        ("---\nkey: value\n  bad: indent\n---\nBody", {}, True, "Body"),
        # Dates stay text, as in Obsidian, so an impossible one is not an error.
        ("---\ndate: 2024-13-45\n---\n", {"date": "2024-13-45"}, False, ""),
        ("---\n1: one\n---\n", {"1": "one"}, False, ""),
    ],
)
def test_frontmatter(
    content: str, frontmatter: dict[str, object], has_error: bool, body: str
) -> None:
    note = parse(content)
    assert note.frontmatter == frontmatter
    assert (note.frontmatter_error is not None) == has_error
    assert content[note.body_start :] == body


def test_frontmatter_error_is_short_and_located() -> None:
    note = parse("---\ntitle: ok\ntags: [a, b\n---\n")
    assert note.frontmatter_error is not None
    assert "line" in note.frontmatter_error
    assert len(note.frontmatter_error) < 200


def test_frontmatter_only_and_empty_notes() -> None:
    for content in ("", "---\ntitle: T\n---\n", "   \n\n"):
        note = parse(content)
        assert note.sections == ()
        assert note.paragraphs == ()
        assert note.links == ()
        assert gist(note) == ""


# --- title, aliases, tags ------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "path", "title"),
    [
        ("---\ntitle: From FM\n---\n# Heading", "a/Note.md", "From FM"),
        ("intro\n\n## Two\n\n# The **First**", "a/Note.md", "The First"),
        ("no headings", "a/b/My Note.md", "My Note"),
        ("## only h2", "My Note.MD", "My Note"),
        ("---\ntitle: 12\n---\n", "x/Name.md", "Name"),
    ],
)
def test_title(content: str, path: str, title: str) -> None:
    assert parse(content, path).title == title


@pytest.mark.parametrize(
    ("frontmatter", "aliases"),
    [
        ("aliases: [Ann, 'Annie B']", ("Ann", "Annie B")),
        ("aliases:\n  - Ann\n  - ann\n  - Bo", ("Ann", "Bo")),
        ("alias: Ann, Bo", ("Ann", "Bo")),
        ("Aliases: Solo", ("Solo",)),
        ("aliases: [1, Ann]", ("Ann",)),
        ("other: x", ()),
    ],
)
def test_aliases(frontmatter: str, aliases: tuple[str, ...]) -> None:
    assert parse(f"---\n{frontmatter}\n---\n").aliases == aliases


@pytest.mark.parametrize(
    ("content", "tags"),
    [
        ("---\ntags: [a, '#b']\n---\n#c", ("a", "b", "c")),
        ("---\ntags: a, b c\n---\n", ("a", "b", "c")),
        ("---\ntag: solo\n---\n", ("solo",)),
        ("---\ntags:\n  - Lore/Magic\n---\n#lore/magic #other", ("Lore/Magic", "other")),
        ("#Tag and #tag and #TAG", ("Tag",)),
        ("#café #naïve #日本語", ("café", "naïve", "日本語")),
        ("#123 #2024 #y2024 #2024y #a_b #a-b", ("y2024", "2024y", "a_b", "a-b")),
        ("#tag, #two. (#three) #four!", ("tag", "two", "four")),
        ("http://example.com/page#anchor and [x](#frag) and a#b", ()),
        ("[[Note#Heading]] [[#Local]] ![[img.png#x]]", ()),
        ("# Heading #intag ##\n\n## Sub", ("intag",)),
        ("#", ()),
        ("`#code` and ``#more ` code``", ()),
        ("```\n#fenced\n```\n\n    #indented\n\n#real", ("real",)),
        ("~~~\n#tilde\n~~~", ()),
        ("---\ntags: [fm]\n---\n```\n#x\n```", ("fm",)),
        ("text\r\n#crlf\r\n", ("crlf",)),
        ("- [ ] task #todo\n- [x] done #done", ("todo", "done")),
        ("> [!note] #callout\n> body #inquote", ("callout", "inquote")),
    ],
)
def test_tags(content: str, tags: tuple[str, ...]) -> None:
    assert parse(content).tags == tags


# --- sections -------------------------------------------------------------------------


def test_sections_paths_and_extents() -> None:
    content = (
        "Intro line.\n"
        "# Alice\n"
        "About Alice.\n"
        "## Backstory\n"
        "Born.\n"
        "### Childhood\n"
        "Small.\n"
        "## Now\n"
        "Grown.\n"
        "# Bob\n"
        "Other.\n"
    )
    note = parse(content)
    sections = note.sections
    assert [(s.heading, s.level, s.path) for s in sections] == [
        (None, 0, ()),
        ("Alice", 1, ("Alice",)),
        ("Backstory", 2, ("Alice", "Backstory")),
        ("Childhood", 3, ("Alice", "Backstory", "Childhood")),
        ("Now", 2, ("Alice", "Now")),
        ("Bob", 1, ("Bob",)),
    ]
    preamble, alice, backstory, childhood, now, bob = sections
    assert content[preamble.start : preamble.end] == "Intro line.\n"
    assert preamble.subtree_end == preamble.end
    assert heading_text(note, alice) == "# Alice\n"
    assert content[alice.body_start : alice.end] == "About Alice.\n"
    assert alice.subtree_end == bob.start
    assert backstory.end == childhood.start
    assert backstory.subtree_end == now.start
    assert childhood.subtree_end == now.start
    assert now.subtree_end == bob.start
    assert bob.end == bob.subtree_end == len(content)


def test_no_preamble_when_note_starts_with_heading() -> None:
    note = parse("---\na: 1\n---\n\n# First\ntext")
    assert [s.heading for s in note.sections] == ["First"]
    assert note.paragraphs[0].section_index == 0


def test_note_without_headings_is_one_preamble() -> None:
    content = "---\na: 1\n---\nJust text.\n"
    note = parse(content)
    (preamble,) = note.sections
    assert (preamble.start, preamble.end) == (note.body_start, len(content))


@pytest.mark.parametrize(
    ("content", "headings"),
    [
        ("```\n# not a heading\n```\n# Real", ["Real"]),
        ("    # indented code\n\n# Real", ["Real"]),
        ("#NoSpace\n# Real", ["Real"]),
        ("> # In a quote\n\n# Real", ["Real"]),
        ("Setext One\n===\n\nSetext Two\n---\n", ["Setext One", "Setext Two"]),
        ("# Closed ##\n", ["Closed"]),
        ("#\n", [""]),
        ("   ### Indented three\n", ["Indented three"]),
        ("\\# escaped\n", []),
        ("---\ntitle: x\n---\n# After FM\n", ["After FM"]),
    ],
)
def test_only_real_headings(content: str, headings: list[str]) -> None:
    assert [s.heading for s in parse(content).sections if s.heading is not None] == headings


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_offsets_with_any_line_ending(newline: str) -> None:
    lines = ["# One", "", "Para [[Link]] #tag", "", "Two", "---", "text"]
    # The frontmatter keeps "\n" so a lone-"\r" body is also a mixed-endings case.
    content = "---\nt: 1\n---\n" + newline.join(lines)
    note = parse(content)
    assert note.frontmatter == {"t": 1}
    one, two = note.sections
    assert content[one.start : one.body_start] == "# One" + newline
    assert content[two.start : two.body_start] == "Two" + newline + "---" + newline
    assert content[note.paragraphs[0].start : note.paragraphs[0].end] == "Para [[Link]] #tag"
    assert content[note.links[0].start : note.links[0].end] == "[[Link]]"
    assert note.tags == ("tag",)


# --- paragraphs and block ids ----------------------------------------------------------


def test_paragraph_kinds_and_spans() -> None:
    content = (
        "# H\n\n"
        "A paragraph\nover two lines.\n\n"
        "- item\n- [ ] task\n  continued\n\n"
        "1. first\n2. second\n\n"
        "> [!warning] Careful\n> inside\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "```python\ncode\n```\n\n"
        "<div>html</div>\n\n"
        "***\n\n"
        "![[image.png]]\n"
    )
    note = parse(content)
    blocks = [(p.kind, content[p.start : p.end]) for p in note.paragraphs]
    assert blocks == [
        ("paragraph", "A paragraph\nover two lines."),
        ("list", "- item\n- [ ] task\n  continued"),
        ("list", "1. first\n2. second"),
        ("quote", "> [!warning] Careful\n> inside"),
        ("table", "| a | b |\n|---|---|\n| 1 | 2 |"),
        ("code", "```python\ncode\n```"),
        ("other", "<div>html</div>"),
        ("paragraph", "![[image.png]]"),
    ]
    assert {p.section_index for p in note.paragraphs} == {0}


def test_block_ids() -> None:
    content = (
        "First para ^p1\n\n"
        "- item one ^li-1\n- item two\n\n"
        "| a |\n|---|\n| 1 |\n\n"
        "^table1\n\n"
        "```\ncode ^notanid\n```\n\n"
        "mid^notid either\n"
    )
    note = parse(content)
    starts = [p.start for p in note.paragraphs]
    assert note.block_ids == {"p1": starts[0], "li-1": starts[1], "table1": starts[2]}
    # The lone "^table1" line names the table and is not a block of its own.
    assert [p.kind for p in note.paragraphs] == ["paragraph", "list", "table", "code", "paragraph"]


# --- Obsidian's own syntax, the byte order mark, the block tree ---------------------------


def test_a_byte_order_mark_is_not_text() -> None:
    note = parse("\ufeff---\ntags: [work]\nstatus: draft\n---\n# Report\nText.\n")
    assert note.frontmatter == {"tags": ["work"], "status": "draft"}
    assert [s.heading for s in note.sections] == ["Report"]
    bare = parse("\ufeff## A\ntext\n")
    assert [s.heading for s in bare.sections] == ["A"]
    assert bare.body_start == 1 and bare.sections[0].start == 1


def test_comments_and_math_hide_their_lines() -> None:
    content = (
        "## Real\n\n"
        "%%\n## Hidden\nnote ^cid\n%%\n\n"
        "$$\n# not a heading\n\nx = 1\n$$\n\n"
        "Text %% opened here\n\n## Also hidden\n\nclosed %% there.\n\n"
        "$$$ pricey, never closed\n\n"
        "## Last\n"
    )
    note = parse(content)
    assert [s.heading for s in note.sections if s.heading] == ["Real", "Last"]
    assert [p.kind for p in note.paragraphs] == ["comment", "math", "comment", "paragraph"]
    assert "cid" not in note.block_ids
    assert gist(note) == "$$$ pricey, never closed"


def test_a_comment_never_closed_hides_the_rest() -> None:
    note = parse("## A\ntext\n%%\n## B\n")
    assert [s.heading for s in note.sections] == ["A"]


def _kinds(blocks: tuple[Block, ...]) -> list[tuple[str, int, int]]:
    return [(b.kind, b.first_line, b.end_line) for b in blocks]


def test_the_block_tree_has_nested_items_with_their_lines() -> None:
    content = "---\na: 1\n---\n- [ ] parent\n\t- [ ] sub1\n\t- [ ] sub2 ^t2\nlazy\n- [ ] other\n"
    _, blocks = parse_structure("n.md", content)
    (listed,) = blocks
    assert (listed.kind, listed.first_line, listed.end_line, listed.markup) == ("list", 3, 8, "-")
    parent, other = listed.children
    assert _kinds(parent.children) == [("paragraph", 3, 4), ("list", 4, 7)]
    assert _kinds(parent.children[1].children) == [("item", 4, 5), ("item", 5, 7)]
    assert _kinds(other.children) == [("paragraph", 7, 8)]


def test_unclosed_blocks_say_so() -> None:
    _, blocks = parse_structure("n.md", "```\ncode\n\n")
    assert [(b.kind, b.closed) for b in blocks] == [("code", False)]
    _, blocks = parse_structure("n.md", "```\ncode\n```\n%%\nhidden\n")
    assert [(b.kind, b.closed) for b in blocks] == [("code", True), ("comment", False)]


@pytest.mark.parametrize(
    ("reference", "parts"),
    [
        ("C# basics", ["C# basics"]),
        ("Lang > std::vector", ["Lang", "std::vector"]),
        ("a -> b", ["a -> b"]),
        ('Notes > "A > B"', ["Notes", "A > B"]),
        ('"#draft"', ["#draft"]),
        ('"say \\"hi\\"" > x', ['say "hi"', "x"]),
        ("## Bob", ["Bob"]),
        ('"Hello" world', ['"Hello" world']),
    ],
)
def test_heading_paths_split(reference: str, parts: list[str]) -> None:
    assert split_heading_reference(reference) == parts


@given(st.lists(st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1), max_size=4))
def test_every_heading_path_reads_back(path: list[str]) -> None:
    names = [" ".join(name.split()) for name in path]
    names = [name for name in names if name]
    assert split_heading_reference(heading_reference(names)) == names


def test_headings_listed_are_found_again() -> None:
    note = parse("# C# basics\n## A > B\n### #draft\n## std::vector\n")
    for section in note.sections:
        found = find_section(note, heading_reference(section.path))
        assert found is not None and found.path == section.path


# --- links ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "link"),
    [
        ("[[Note]]", WikiLink("Note", None, None, None, False, 0, 8)),
        ("[[Note|Shown]]", WikiLink("Note", None, None, "Shown", False, 0, 14)),
        ("[[Note#Head]]", WikiLink("Note", "Head", None, None, False, 0, 13)),
        ("[[Note#H1#H2|x]]", WikiLink("Note", "H2", None, "x", False, 0, 16)),
        ("[[Note#^abc123]]", WikiLink("Note", None, "abc123", None, False, 0, 16)),
        ("[[#Local]]", WikiLink("", "Local", None, None, False, 0, 10)),
        ("[[#^blk]]", WikiLink("", None, "blk", None, False, 0, 9)),
        ("![[pic.png]]", WikiLink("pic.png", None, None, None, True, 0, 12)),
        ("![[Note#Sec|alias]]", WikiLink("Note", "Sec", None, "alias", True, 0, 19)),
        ("[[ spaced / path.md ]]", WikiLink("spaced / path.md", None, None, None, False, 0, 22)),
        ("[[Note|]]", WikiLink("Note", None, None, None, False, 0, 9)),
        ("| [[Note\\|alias]] |", WikiLink("Note", None, None, "alias", False, 2, 17)),
        (
            "[text](Some%20Note.md)",
            WikiLink("Some Note.md", None, None, "text", False, 0, 22),
        ),
        (
            '[t](<My Note.md#Part%20Two> "title")',
            WikiLink("My Note.md", "Part Two", None, "t", False, 0, 36),
        ),
        ("![](Folder/Doc.md#^b1)", WikiLink("Folder/Doc.md", None, "b1", None, True, 0, 22)),
    ],
)
def test_link_forms(markdown: str, link: WikiLink) -> None:
    assert parse(markdown).links == (link,)


@pytest.mark.parametrize(
    "markdown",
    [
        "`[[in code]]`",
        "```\n[[in fence]]\n```",
        "    [[indented code]]",
        "[[]]",
        "[site](https://example.com/a.md)",
        "[mail](mailto:x@y.md)",
        "[obs](obsidian://open?file=a.md)",
        "[img](picture.png)",
        "[anchor](#heading)",
        "---\nrelated: '[[In Frontmatter]]'\n---\n",
    ],
)
def test_not_links(markdown: str) -> None:
    assert parse(markdown).links == ()


def test_links_in_document_order_with_absolute_offsets() -> None:
    content = "---\na: 1\n---\nSee [md](B.md), then [[A]] and ![[c.png]].\n"
    note = parse(content)
    assert [link.target for link in note.links] == ["B.md", "A", "c.png"]
    assert [content[link.start : link.end] for link in note.links] == [
        "[md](B.md)",
        "[[A]]",
        "![[c.png]]",
    ]


# --- find_section --------------------------------------------------------------------------

OUTLINE = (
    "# Characters\n"
    "## Alice\n"
    "### Childhood\n"
    "a\n"
    "## Bob\n"
    "### Childhood\n"
    "b\n"
    "# Childhood\n"
    "top\n"
    "# Q&A > Misc\n"
    "# Plans #draft\n"
    "# **Bold** heading\n"
)


@pytest.mark.parametrize(
    ("reference", "path"),
    [
        ("Childhood", ("Childhood",)),  # the full path wins over the earlier nested one
        ("Characters > Bob > Childhood", ("Characters", "Bob", "Childhood")),
        ("characters::bob::childhood", ("Characters", "Bob", "Childhood")),
        ("Characters#Bob#Childhood", ("Characters", "Bob", "Childhood")),
        ("Bob > Childhood", ("Characters", "Bob", "Childhood")),
        ("Characters > Childhood", ("Characters", "Alice", "Childhood")),
        ("  ALICE  ", ("Characters", "Alice")),
        ("#Alice", ("Characters", "Alice")),
        ("## Bob", ("Characters", "Bob")),
        ("Q&A > Misc", ("Q&A > Misc",)),
        ("Plans #draft", ("Plans #draft",)),
        ("bold   HEADING", ("**Bold** heading",)),
    ],
)
def test_find_section(reference: str, path: tuple[str, ...]) -> None:
    section = find_section(parse(OUTLINE), reference)
    assert section is not None
    assert section.path == path


@pytest.mark.parametrize("reference", ["", "   ", "#", "Nowhere", "Alice > Bob", "Bob > Alice"])
def test_find_section_misses(reference: str) -> None:
    assert find_section(parse(OUTLINE), reference) is None


def test_find_section_never_returns_preamble() -> None:
    assert find_section(parse("just text"), "just text") is None


# --- LinkResolver ----------------------------------------------------------------------------

VAULT = [
    "Home.md",
    "Characters/Alice.md",
    "Characters/Bob.md",
    "Archive/Characters/Alice.md",
    "Archive/Bob.md",
    "Lore/Magic/Fire.md",
    "Lore/Notes.md",
    "Projects/Notes.md",
    "Attachments/map.png",
    "Lore/map.png",
    "Report.v2.md",
    "Case/Mixed.md",
]


@pytest.mark.parametrize(
    ("target", "from_path", "resolved"),
    [
        ("", "Characters/Alice.md", "Characters/Alice.md"),
        ("Home", "Lore/Notes.md", "Home.md"),
        ("Home.md", "Lore/Notes.md", "Home.md"),
        ("Characters/Alice", "Home.md", "Characters/Alice.md"),
        ("Archive/Characters/Alice.md", "Home.md", "Archive/Characters/Alice.md"),
        ("/Characters/Bob", "Home.md", "Characters/Bob.md"),
        ("Magic/Fire", "Lore/Notes.md", "Lore/Magic/Fire.md"),  # relative to the folder
        ("../Home", "Lore/Notes.md", "Home.md"),
        ("Alice", "Home.md", "Characters/Alice.md"),  # fewest folders
        ("Alice", "Archive/Characters/X.md", "Archive/Characters/Alice.md"),  # same folder
        ("Bob", "Archive/Note.md", "Archive/Bob.md"),
        ("Bob", "Home.md", "Archive/Bob.md"),  # same depth: the shorter path
        ("Notes", "Projects/Plan.md", "Projects/Notes.md"),
        ("Notes", "Home.md", "Lore/Notes.md"),  # tie on depth and length: alphabetical
        ("alice", "Home.md", "Characters/Alice.md"),
        ("case/MIXED", "Home.md", "Case/Mixed.md"),
        ("Fire.md", "Home.md", "Lore/Magic/Fire.md"),
        ("Characters/Alice#Childhood", "Home.md", "Characters/Alice.md"),
        ("map.png", "Home.md", "Lore/map.png"),
        ("map.png", "Attachments/x.md", "Attachments/map.png"),
        ("Attachments/map.png", "Lore/Notes.md", "Attachments/map.png"),
        ("Report.v2", "Home.md", "Report.v2.md"),
        ("Missing", "Home.md", None),
        ("map", "Home.md", None),
        ("ice", "Home.md", None),  # a name must match whole, not as a suffix
    ],
)
def test_resolve_link(target: str, from_path: str, resolved: str | None) -> None:
    assert LinkResolver(VAULT).resolve(target, from_path) == resolved


# --- plain_text and gist ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "plain"),
    [
        ("[[Note]]", "Note"),
        ("[[Note|Alias]]", "Alias"),
        ("[[Note#Part]]", "Note > Part"),
        ("[[#Part]]", "Part"),
        ("![[pic.png]]", "pic.png"),
        ("[text](http://x.y)", "text"),
        ("**bold** *it* ***both*** __b__ _i_", "bold it both b i"),
        ("snake_case_name and 2 * 3 * 4", "snake_case_name and 2 * 3 * 4"),
        ("==marked== ~~gone~~", "marked gone"),
        ("## Heading ##", "Heading"),
        ("# Title\nbody", "Title\nbody"),
        ("> [!note]- Title\n> body", "Title\nbody"),
        ("> > nested", "nested"),
        ("text ^block-1", "text"),
        ("`[[kept]] **as is**` and **this**", "[[kept]] **as is** and this"),
        ("- item #tag", "- item #tag"),
    ],
)
def test_plain_text(markdown: str, plain: str) -> None:
    assert plain_text(markdown) == plain


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("---\nsummary: A **bold** claim.\n---\nBody.", "A bold claim."),
        ("---\ndescription: Described.\n---\nBody.", "Described."),
        ("---\ngist: '  '\n---\nBody text here.", "Body text here."),
        ("First sentence. Second one.", "First sentence."),
        (
            "See [[Alice|my friend]] and **her** dog, e.g. Rex. Then more.",
            "See my friend and her dog, e.g. Rex.",
        ),
        (
            "# Title\n\n> [!info] Callout\n> skipped\n\n![[banner.png]]\n\n"
            "| t |\n|---|\n| x |\n\n```\ncode\n```\n\n- a list\n\n"
            "Related: [[A]], [[B]]\n\nUp:: [[MOC]]\n\nPrev: [[A]] · Next: [[B]]\n\n"
            "#tag #other\n\nThe real prose starts here. More.",
            "The real prose starts here.",
        ),
        ("Mira is [[Alice]]'s [[sister]].", "Mira is Alice's sister."),
        ("Line one\nline two without stop", "Line one line two without stop"),
        ("- only\n- a list", ""),
    ],
)
def test_gist(content: str, expected: str) -> None:
    assert gist(parse(content)) == expected


def test_gist_is_cut_at_a_word_boundary() -> None:
    note = parse("word " * 100)
    cut = gist(note, max_chars=23)
    assert cut == "word word word word…"
    assert len(cut) <= 24


# --- robustness and scale --------------------------------------------------------------------

markdown_pieces = [*"ab #-*>|`[]()!^\n\r:_=~\t1é", "---\n", "[[", "]]", "```", ".md", "    "]
markdownish = st.lists(st.sampled_from(markdown_pieces), max_size=150).map("".join)


@settings(max_examples=200, deadline=None)
@given(markdownish)
def test_parse_never_raises_and_offsets_are_consistent(content: str) -> None:
    note = parse(content)
    assert 0 <= note.body_start <= len(content)
    for section in note.sections:
        assert note.body_start <= section.start <= section.body_start <= section.end
        assert section.end <= section.subtree_end <= len(content)
    for paragraph in note.paragraphs:
        assert note.body_start <= paragraph.start < paragraph.end <= len(content)
        assert 0 <= paragraph.section_index < len(note.sections)
        assert note.sections[paragraph.section_index].start <= paragraph.start
    for link in note.links:
        assert content[link.start : link.end].endswith(("]]", ")"))
    assert list(note.links) == sorted(note.links, key=lambda link: link.start)
    for tag in note.tags:
        assert tag and not tag.startswith("#")
    gist(note)


def test_a_30kb_note_parses_into_all_its_sections() -> None:
    sentence = "Mira crossed the [[Harbor|harbour]] at dusk, **carrying** the `lantern` #lore/sea. "
    section = (
        "## Part {}\n\n"
        + (sentence * 4 + "\n\n") * 3
        + "- [ ] task\n- item [[Link]]\n\n```\n# code\n```\n\n"
    )
    content = "---\ntitle: Big\ntags: [a]\n---\n" + "".join(section.format(i) for i in range(30))
    assert len(content) > 30_000
    note = parse(content)
    assert [s.heading for s in note.sections] == [f"Part {i}" for i in range(30)]
    assert note.tags == ("a", "lore/sea")


def test_links_resolve_among_thousands_of_paths() -> None:
    paths = [f"Folder {i % 50}/Note {i}.md" for i in range(5000)]
    resolver = LinkResolver(paths)
    resolved = [resolver.resolve(f"Note {i * 7}", "Folder 3/Here.md") for i in range(500)]
    assert resolved[1] == "Folder 7/Note 7.md"
    assert resolved[0] == "Folder 0/Note 0.md"
