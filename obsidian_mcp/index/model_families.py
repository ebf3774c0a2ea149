# pyright: strict
"""How the model families we support are run, from their model cards: the last word on a
model whose repository says nothing of itself (many ONNX ports) and names no upstream
repository that does (model_fetch.py reads those first).

An entry matches a repository's name (the part after the owner, lower case), so a port
such as `Xenova/bge-small-en-v1.5` finds its family by name. Each entry cites the model
card it was read from.
"""

import re
from dataclasses import dataclass

from obsidian_mcp.index.recipe import ModelRecipe, Pooling

# BGE's, and the models trained after it, instruction before a question for retrieval.
_RETRIEVAL_INSTRUCTION = "Represent this sentence for searching relevant passages: "


@dataclass(frozen=True, slots=True)
class ModelFamily:
    name_pattern: re.Pattern[str]
    pooling: Pooling
    query_prompt: str
    document_prompt: str
    model_card: str

    def recipe(self, matched_name: str) -> ModelRecipe:
        return ModelRecipe(
            self.pooling,
            self.query_prompt,
            self.document_prompt,
            described_by=f"the family table's entry for {matched_name} ({self.model_card})",
        )


FAMILIES = (
    ModelFamily(
        re.compile(r"bge-(small|base|large)-en-v1\.5"),
        Pooling.CLS,
        _RETRIEVAL_INSTRUCTION,
        "",
        "https://huggingface.co/BAAI/bge-small-en-v1.5",
    ),
    ModelFamily(
        re.compile(r"(multilingual-)?e5-(small|base|large)(-v2)?"),
        Pooling.MEAN,
        "query: ",
        "passage: ",
        "https://huggingface.co/intfloat/e5-small-v2",
    ),
    ModelFamily(
        re.compile(r"nomic-embed-text-v1(\.5)?"),
        Pooling.MEAN,
        "search_query: ",
        "search_document: ",
        "https://huggingface.co/nomic-ai/nomic-embed-text-v1.5",
    ),
    ModelFamily(
        re.compile(r"snowflake-arctic-embed-(xs|s|m|m-long|l)(-v1\.5)?"),
        Pooling.CLS,
        _RETRIEVAL_INSTRUCTION,
        "",
        "https://huggingface.co/Snowflake/snowflake-arctic-embed-s",
    ),
    ModelFamily(
        re.compile(r"mxbai-embed-large-v1"),
        Pooling.CLS,
        _RETRIEVAL_INSTRUCTION,
        "",
        "https://huggingface.co/mixedbread-ai/mxbai-embed-large-v1",
    ),
    ModelFamily(
        re.compile(r"gte-(small|base|large)"),
        Pooling.MEAN,
        "",
        "",
        "https://huggingface.co/thenlper/gte-small",
    ),
    ModelFamily(
        re.compile(r"all-(minilm-l6|minilm-l12|mpnet-base)-v2|paraphrase-.*"),
        Pooling.MEAN,
        "",
        "",
        "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2",
    ),
)


def family_recipe(repository: str) -> ModelRecipe | None:
    """The recipe of the family whose pattern matches the whole of `repository`'s name
    (owner left out, lower case); None for a name no entry knows."""
    name = repository.rsplit("/", 1)[-1].lower()
    for family in FAMILIES:
        if family.name_pattern.fullmatch(name):
            return family.recipe(repository)
    return None
