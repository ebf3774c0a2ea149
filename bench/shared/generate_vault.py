"""Generate a deterministic vault of N notes for scale benchmarks.

    python -m bench.shared.generate_vault OUT_DIR --notes 10000 [--seed 7] [--no-vectors]

Writes ``OUT_DIR/vault/`` (the notes), ``OUT_DIR/planted.jsonl`` (one question per planted
passage, in ``fixtures/questions.jsonl``'s format, category ``planted``) and, unless
``--no-vectors``, ``OUT_DIR/vault/.smart-env/`` plus ``OUT_DIR/query_vectors.jsonl`` (where
the stand-in's ``/search/smart`` looks by default).

The same N and seed always give byte-identical files. Notes sit in ten top folders
(split into ``Part NN`` subfolders of at most 250 notes once a folder would hold more),
each with frontmatter (tags, date), an H1 title, an intro and two to four H2 sections of
sentences built from a seeded vocabulary, wikilinks to other notes and inline tags.
About one note in a hundred (at least five, at most fifty) carries a planted passage: a
sentence naming an invented person found nowhere else, whose ending is the known answer.

The vectors are not a language model's: they are signed feature-hashed, tf-idf weighted
bags of words (384 floats, L2-normalised, 4 decimals) under the model key
``bench/hashed-bow-384``, one per note and none per block, so a 10,000-note vault needs no
model. They give the semantic sources real vectors of the real size to load and rank,
which is what a timing run needs; they say little about semantic quality.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

MODEL_KEY = "bench/hashed-bow-384"
DIMENSIONS = 384


@dataclass(frozen=True)
class World:
    """What a generated vault's notes are about: the words its templates are filled with."""

    folders: tuple[str, ...]
    adjectives: tuple[str, ...]
    nouns: tuple[str, ...]
    verbs: tuple[str, ...]
    people: tuple[str, ...]
    places: tuple[str, ...]
    tags: tuple[str, ...]
    sections: tuple[str, ...]
    things: tuple[str, ...]
    animals: tuple[str, ...]
    templates: tuple[str, ...]


PER_SUBFOLDER = 250
# fmt: off
SYLLABLES = ("var", "thal", "ish", "mon", "dre", "ka", "lus", "bel", "qui", "ros", "zen", "tor",
             "wyn", "fal", "gri", "oth", "pem", "sul", "dor", "aki", "nev", "jor", "lin",)
ORDINALS = ("second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",)
# The fixture vault's own world: its places (Vellmouth, Greyhook, Caddow, ...), harbours,
# ferries and ledgers. A development vault placed among these notes is among notes on its
# own subjects, not unrelated ones (issue 38).
HARBOUR = World(
    folders=("Characters", "Places", "Sessions", "Lore", "Items", "Journal", "Projects",
             "Research", "Archive", "Inbox",),
    adjectives=("amber", "ashen", "bitter", "brackish", "brass", "broken", "copper", "crooked",
                "drowned", "dusty", "faded", "gilded", "grey", "hollow", "iron", "lantern-lit",
                "lean", "misty", "narrow", "quiet", "rusted", "salt-stained", "silver", "sleepy",
                "slow", "smoky", "sunken", "tallow", "tarred", "tidal", "waxen", "weathered",
                "whispering", "wind-bent", "wooden",),
    nouns=("anchor", "archive", "bell", "bridge", "candle", "cellar", "chapel", "chart",
           "compass", "crossing", "dock", "ferry", "harbour", "hearth", "ledger", "lighthouse",
           "loft", "market", "mill", "net", "orchard", "quay", "reef", "rope", "shrine", "stair",
           "tavern", "tide", "tower", "warehouse", "well", "wharf", "wick",),
    verbs=("mended", "carried", "watched", "counted", "traded", "hid", "followed", "questioned",
           "repaired", "sold", "painted", "measured", "lost", "found", "guarded", "sketched",
           "borrowed", "returned", "burned", "opened",),
    people=("Alder", "Bram", "Cass", "Dunmore", "Edda", "Fenn", "Garrow", "Hesk", "Ilse", "Jory",
            "Kell", "Lune", "Marra", "Nesk", "Orrin", "Pell", "Quill", "Rhea", "Sable", "Tamsin",
            "Ulm", "Vesper", "Wren", "Yarrow",),
    places=("Vellmouth", "Greyhook", "Saltwick", "Caddow", "Marrowdown", "Wendwater",
            "Tallowgate", "Fenhollow", "Brinecliff", "Ashmere", "Gullrock", "Lowfield",),
    tags=("lore", "session", "character", "place", "item", "faction", "travel", "weather",
          "trade", "craft", "history", "rumour", "debt", "festival",),
    sections=("Overview", "Details", "History", "Notes", "Rumours", "Connections", "Timeline",
              "Open questions", "Appearance", "Trade", "Dangers",),
    things=("key", "ledger", "lantern", "map", "ring", "flute", "knife", "compass", "coin",
            "seal", "letter", "bell",),
    animals=("heron", "gull", "otter", "crab", "eel", "owl", "fox", "hare", "seal", "cormorant",),
    templates=(
        "{person} {verb} the {adj} {noun} near {place} before the tide turned.",
        "Nobody in {place} remembers who first {verb} the {noun}, but {person} claims it.",
        "The {adj} {noun} is older than the {noun2} beside it, and twice as stubborn.",
        "Every spring the people of {place} gather at the {noun} to trade {noun2} stories.",
        "{person} keeps a {adj} {thing} in a tin, and will not say where it came from.",
        "It is said that the {noun} at {place} {verb} itself once, in a storm.",
        "A {adj} light hangs over the {noun} on the nights when {person} is away.",
        "See also [[{link}]] for what happened at the {noun} afterwards.",
        "The ledger lists {number} crates of {noun2} bound for {place}, none of them signed.",
        "{person} and {person2} argued about the {adj} {noun} until the candles ran low.",
    ),
)
# A household's garden and kitchen notes: no place, person or subject word of either
# development vault (fixtures, ledgerline), so a vault placed among them is among notes on
# other subjects, as a user's lore or project notes sit beside their everyday ones.
GARDEN = World(
    folders=("Garden", "Kitchen", "Recipes", "Pantry", "Seeds", "Planting", "Harvest",
             "Shopping", "Repairs", "Household",),
    adjectives=("crisp", "dried", "early", "fresh", "frosted", "ginger", "glazed", "leafy",
                "mild", "peppery", "pickled", "potted", "raised", "ripe", "roasted", "seeded",
                "shaded", "soaked", "sour", "spiced", "steamed", "sweet", "tangy", "tender",
                "toasted", "trimmed", "warm", "watered", "wilted", "zesty",),
    nouns=("apricot", "basil", "bean", "beet", "broccoli", "cabbage", "carrot", "chard",
           "chive", "courgette", "cucumber", "fennel", "garlic", "greenhouse", "jam", "kale",
           "leek", "lentil", "lettuce", "marrow", "mint", "mulch", "oregano", "parsnip", "pea",
           "pepper", "plum", "potato", "pumpkin", "radish", "rhubarb", "seedling", "shallot",
           "sorrel", "spinach", "squash", "thyme", "tomato", "turnip",),
    verbs=("sowed", "pruned", "watered", "pickled", "roasted", "weeded", "harvested", "thinned",
           "staked", "composted", "blanched", "froze", "simmered", "chopped", "potted",
           "transplanted", "mulched", "dried", "preserved", "tasted",),
    people=("Agnes", "Basil", "Cora", "Dilys", "Elsie", "Florence", "Gwen", "Hattie", "Ivy",
            "Jean", "Lottie", "Mabel", "Nell", "Olive", "Peggy", "Rosa", "Sybil", "Trudy",
            "Violet", "Winnie",),
    places=("the allotment", "the back plot", "the cold frame", "the raised bed",
            "the polytunnel", "the window box", "the herb spiral", "the south border",
            "the compost bay", "the potting bench", "the patio tubs", "the fruit cage",),
    tags=("garden", "kitchen", "recipe", "sowing", "harvest", "pests", "soil", "watering",
          "preserving", "seeds", "shopping", "budget", "repairs", "weekly",),
    sections=("Overview", "Sowing", "Care", "Harvest", "Recipe", "Method", "Ingredients",
              "Problems", "Notes", "Next year", "Costs",),
    things=("trowel", "colander", "sieve", "jar", "ladle", "whisk", "secateurs", "funnel",
            "label", "twine", "dibber", "scoop",),
    animals=("slug", "snail", "aphid", "blackbird", "robin", "thrush", "ladybird", "bee",
             "wasp", "hedgehog",),
    templates=(
        "{person} {verb} the {adj} {noun} in {place} after the first frost.",
        "The {adj} {noun} did better in {place} than the {noun2} beside it this year.",
        "{person} says the {noun} needs less water than the {noun2}, and is usually right.",
        "Add the {adj} {noun} to the pan once the {noun2} has softened, then season.",
        "{person} keeps a {adj} {thing} on the shelf by the back door for the {noun}.",
        "Last week {person} {verb} {number} rows of {noun} along {place}.",
        "See also [[{link}]] for how the {noun} was stored afterwards.",
        "The shopping list has {number} packets of {noun2} seed and a new {thing}.",
        "Cover the {noun} at night in {place}; the {noun2} can stay out until October.",
        "{person} and {person2} disagree about when to pick the {adj} {noun}.",
    ),
)
WORLDS = {"harbour": HARBOUR, "garden": GARDEN}
# fmt: on


@dataclass(frozen=True)
class Planted:
    id: str
    path: str
    question: str
    gold: str


def _invented_name(rng: random.Random, taken: set[str]) -> str:
    while True:
        first = "".join(rng.choice(SYLLABLES) for _ in range(2)).capitalize()
        last = "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize()
        name = f"{first} {last}"
        if name not in taken:
            taken.add(name)
            return name


def _sentence(world: World, rng: random.Random, titles: list[str]) -> str:
    return rng.choice(world.templates).format(
        person=rng.choice(world.people),
        person2=rng.choice(world.people),
        verb=rng.choice(world.verbs),
        adj=rng.choice(world.adjectives),
        noun=rng.choice(world.nouns),
        noun2=rng.choice(world.nouns),
        place=rng.choice(world.places),
        thing=rng.choice(world.things),
        link=rng.choice(titles),
        number=rng.randint(2, 90),
    )


def _paragraph(world: World, rng: random.Random, titles: list[str]) -> str:
    text = " ".join(_sentence(world, rng, titles) for _ in range(rng.randint(3, 5)))
    if rng.random() < 0.15:
        text += f" #{rng.choice(world.tags)}"
    return text


def _paths(world: World, count: int, rng: random.Random) -> tuple[list[str], list[str]]:
    titles: list[str] = []
    seen: set[str] = set()
    for index in range(count):
        title = (
            f"{rng.choice(world.adjectives).capitalize()} {rng.choice(world.nouns).capitalize()}"
        )
        if title in seen:
            title = f"{title} {index}"
        seen.add(title)
        titles.append(title)
    folders = world.folders
    per_folder = math.ceil(count / len(folders))
    paths: list[str] = []
    for index, title in enumerate(titles):
        folder, position = folders[index % len(folders)], index // len(folders)
        if per_folder > PER_SUBFOLDER:
            folder += f"/Part {position // PER_SUBFOLDER + 1:02d}"
        paths.append(f"{folder}/{title}.md")
    return titles, paths


def _note(
    world: World,
    rng: random.Random,
    index: int,
    title: str,
    titles: list[str],
    planted: str | None,
) -> str:
    tags = sorted(set(rng.sample(world.tags, rng.randint(1, 3))))
    day = 1 + index % 28
    month = 1 + (index // 28) % 12
    lines = [
        "---",
        f"tags: [{', '.join(tags)}]",
        f"created: 2025-{month:02d}-{day:02d}",
        "---",
        f"# {title}",
        "",
        _paragraph(world, rng, titles),
        "",
    ]
    sections = rng.sample(world.sections, rng.randint(2, 4))
    plant_at = rng.randrange(len(sections))
    for number, heading in enumerate(sections):
        lines += [f"## {heading}", ""]
        paragraphs = [_paragraph(world, rng, titles) for _ in range(rng.randint(1, 3))]
        if planted is not None and number == plant_at:
            paragraphs[-1] += " " + planted
        for paragraph in paragraphs:
            lines += [paragraph, ""]
    return "\n".join(lines)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


class HashedEmbedder:
    """Signed feature hashing of a text's words, each weighted by (1 + log tf) * idf over
    the generated notes, L2-normalised and rounded to 4 decimals."""

    def __init__(self, corpus: list[str]) -> None:
        self.count = len(corpus)
        self.doc_freq = Counter(word for text in corpus for word in set(_words(text)))

    def vector(self, text: str) -> list[float]:
        vec = [0.0] * DIMENSIONS
        for word, tf in sorted(Counter(_words(text)).items()):
            digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
            slot = int.from_bytes(digest[:2], "little") % DIMENSIONS
            idf = math.log((1 + self.count) / (1 + self.doc_freq.get(word, 0)))
            weight = (1 + math.log(tf)) * idf
            vec[slot] += weight if digest[2] & 1 else -weight
        norm = math.sqrt(sum(x * x for x in vec)) or 1.0
        return [round(x / norm, 4) for x in vec]


def _write_vectors(vault: Path, notes: dict[str, str], out: Path, planted: list[Planted]) -> None:
    env = vault / ".smart-env"
    (env / "multi").mkdir(parents=True, exist_ok=True)
    settings = {
        "smart_sources": {
            "embed_model": {"adapter": "transformers", "transformers": {"model_key": MODEL_KEY}}
        },
        "smart_blocks": {"embed_blocks": False},
    }
    (env / "smart_env.json").write_text(json.dumps(settings, indent=2) + "\n", "utf-8")
    embedder = HashedEmbedder(list(notes.values()))
    for path, content in notes.items():
        data = {
            "path": path,
            "embeddings": {MODEL_KEY: {"vec": embedder.vector(content)}},
            "last_read": {
                "hash": hashlib.sha256(content.strip().encode()).hexdigest(),
                "mtime": 1_767_225_600_000,
            },
        }
        name = re.sub(r"[\s/.]", "_", path) + ".ajson"
        line = (
            json.dumps(f"smart_sources:{path}")
            + ": "
            + json.dumps(data, separators=(",", ":"))
            + ",\n"
        )
        (env / "multi" / name).write_text(line, "utf-8")
    rows = [
        json.dumps({"query": p.question, "model": MODEL_KEY, "vec": embedder.vector(p.question)})
        for p in planted
    ]
    (out / "query_vectors.jsonl").write_text("\n".join(rows) + "\n", "utf-8")


def generate(
    out: Path, notes: int, *, seed: int = 7, vectors: bool = True, world: World = HARBOUR
) -> list[Planted]:
    """Write the vault under ``out`` and return its planted passages."""
    rng = random.Random(seed)
    vault = out / "vault"
    vault.mkdir(parents=True, exist_ok=True)
    titles, paths = _paths(world, notes, rng)
    count = max(5, min(50, notes // 100))
    step = max(1, notes // count)
    taken: set[str] = set()
    planted: list[Planted] = []
    contents: dict[str, str] = {}
    for index, (title, path) in enumerate(zip(titles, paths, strict=True)):
        sentence = None
        if index % step == step // 2 and len(planted) < count:
            person, thing = _invented_name(rng, taken), rng.choice(world.things)
            gold = ""
            while not gold or gold in taken:
                ordinal, noun = rng.choice(ORDINALS), rng.choice(world.nouns)
                place, animal = rng.choice(world.places), rng.choice(world.animals)
                gold = f"under the {ordinal} {noun} of {place}, by the sign of the {animal}"
            taken.add(gold)
            sentence = f"{person} hid the {thing} {gold}."
            planted.append(
                Planted(
                    f"p{len(planted) + 1:02d}", path, f"Where did {person} hide the {thing}?", gold
                )
            )
        content = _note(world, rng, index, title, titles, sentence)
        target = vault / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, "utf-8")
        contents[path] = content
    rows = [
        json.dumps(
            {
                "id": p.id,
                "question": p.question,
                "gold": p.gold,
                "category": "planted",
                "folder": None,
                "gold_file": p.path,
            }
        )
        for p in planted
    ]
    (out / "planted.jsonl").write_text("\n".join(rows) + "\n", "utf-8")
    if vectors:
        _write_vectors(vault, contents, out, planted)
    return planted


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Generate a deterministic benchmark vault.")
    parser.add_argument("out", type=Path, help="output folder (vault/ goes inside)")
    parser.add_argument("--notes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-vectors", action="store_true")
    parser.add_argument(
        "--world",
        choices=sorted(WORLDS),
        default="harbour",
        help="what the notes are about: harbour (the fixture vault's own places and "
        "subjects) or garden (neither development vault's)",
    )
    args = parser.parse_args(argv)
    planted = generate(
        args.out,
        args.notes,
        seed=args.seed,
        vectors=not args.no_vectors,
        world=WORLDS[args.world],
    )
    print(f"{args.notes} notes, {len(planted)} planted passages -> {args.out / 'vault'}")


if __name__ == "__main__":
    main()
