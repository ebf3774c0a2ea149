# pyright: strict
"""How a model is run: the pooling and prompts its authors trained it with (`ModelRecipe`),
the role a text is embedded in (`TextRole`), and the name its vectors are stored under
(`vector_space`). Plain data: no model runtime is loaded by importing it."""

import hashlib
import json
from dataclasses import dataclass
from enum import Enum, StrEnum


class TextRole(Enum):
    """What a text is to the model: a question, or a document that may answer one."""

    QUERY = "query"
    DOCUMENT = "document"


class Pooling(StrEnum):
    """How one vector per text is made of the model's vectors per word piece, named as
    sentence-transformers' Pooling module names its modes."""

    MEAN = "mean"
    CLS = "cls"
    MAX = "max"
    LAST_TOKEN = "lasttoken"


@dataclass(frozen=True, slots=True)
class ModelRecipe:
    """How a model's authors run it, and where that was read (None: nowhere, assumed)."""

    pooling: Pooling = Pooling.MEAN
    query_prompt: str = ""
    document_prompt: str = ""
    # Whether the model's own pipeline ends by normalising (sentence-transformers' Normalize
    # module). Shown only: the index ranks by cosine, so every vector is normalised here.
    normalize: bool = True
    described_by: str | None = None

    def prompt(self, role: TextRole) -> str:
        return self.query_prompt if role is TextRole.QUERY else self.document_prompt


# What a model is run with when nothing it came with says otherwise: marked assumed.
ASSUMED_RECIPE = ModelRecipe()

# all-MiniLM-L6-v2 as its authors run it: modules.json of sentence-transformers/
# all-MiniLM-L6-v2 lists Transformer, Pooling (mean tokens) and Normalize, and its
# config_sentence_transformers.json has no prompts.
BUNDLED_RECIPE = ModelRecipe(
    described_by="sentence-transformers/all-MiniLM-L6-v2's sentence-transformers files"
)


def how_pooled_and_prompted(recipe: ModelRecipe, pooling: Pooling | None) -> str:
    """The pooling applied (`pooling`: the recipe's, or None where the model's output is
    already one vector per text) and each role's prompt, in words."""
    prompts = ", ".join(
        f"{role.value} prompt {recipe.prompt(role)!r}" for role in TextRole if recipe.prompt(role)
    )
    pooled = "pooled by the model" if pooling is None else f"{pooling} pooling"
    return f"{pooled}, {prompts or 'no prompts'}"


def vector_space(model_id: str, pooling: Pooling | None, recipe: ModelRecipe) -> str:
    """The name under which a model's vectors are stored (passage index, memory cache):
    the model, and how it was run when that is not mean pooling without prompts, so that
    vectors made another way are never read as this way's. `pooling` None: the model's
    output is already one vector per text. The prompts are named by a short hash: the name
    is stored with every vector."""
    if pooling is Pooling.MEAN and not (recipe.query_prompt or recipe.document_prompt):
        return model_id
    how = ["pooled by the model" if pooling is None else f"{pooling} pooling"]
    if recipe.query_prompt or recipe.document_prompt:
        prompts = json.dumps([recipe.query_prompt, recipe.document_prompt]).encode()
        how.append(f"prompts {hashlib.sha256(prompts).hexdigest()[:8]}")
    return f"{model_id} ({', '.join(how)})"
