# pyright: strict
"""A tokenizer-free token estimate, good enough to budget replies."""


def estimate_tokens(text: str) -> int:
    """Roughly four characters per token, rounded up; 0 for the empty string."""
    return -(-len(text) // 4)
