# pyright: strict
"""Small wording helpers shared by the renderers."""


def plural(count: int, word: str, many: str | None = None) -> str:
    """`1 mention`, `3 mentions`; `many` for irregular plurals (`memory`, `memories`)."""
    return f"{count:,} {word}" if count == 1 else f"{count:,} {many or word + 's'}"
