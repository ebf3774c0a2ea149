"""LoCoMo turn-level retrieval (not a test): memory recall on a public long-conversation set.

    python -m bench.memory.locomo --data PATH/locomo10.zip [--conversations dev|held-out|all]
        [--save RUN.json] [--before RUN.json]

LoCoMo (Maharana et al. 2024) is ten conversations of 19-32 sessions between two people,
with questions whose evidence is the dialog turns that answer them. Its repository,
github.com/snap-research/locomo, holds `data/locomo10.zip`; it has no licence file, so the
data is not part of this project: fetch it and pass its path. A conversation's id is the
number in its file name there (`data/multimodal_dialog/locomo10_v2/<n>.json`). Conversations
26, 30, 41, 42 and 43 are for development; the other five are held out (run them once,
untuned, to report).

Every dialog turn becomes one memory, `"<speaker>: <text>"` plus `" [shares <caption>]"`
where the turn shows an image, tagged and scoped with the conversation's id, `occurred` the
date of its session; all of them in one vault, written as the memory file the server reads
(`encode`, what `vault_remember` appends) so that the index is built by the bulk load a
server does on its first recall. Then every question of categories 1-4 (5 is adversarial:
no evidence to find) whose evidence ids all name turns of its conversation is asked through
an MCP client of the server, `vault_recall(query=question, scope=<id>, limit=10)`, once the
server's vectors cover every memory. A hit is a returned memory that is one of the
question's evidence turns: any@k, one of them in the first k; all@5, every one in the first
five; MRR@10, the reciprocal rank of the first within ten. Tokens per recall are the
reply's (characters / 4, `bench.shared.harness.count_tokens`); latency is the tool call's, in the
same process.

In the same run, over the same turns of the question's conversation, three references:
plain Okapi BM25 (k1 1.2, b 0.75, lower-cased words, no stopwords, no stemming), the
server's bundled embedding model by cosine alone, and the reciprocal-rank fusion of those
two (equal weights, k = 60); their tokens are those of the ten memories' bare text.
Intervals are 95% bootstrap intervals over questions. `--save` keeps every question's
ranks, `--before` adds a saved run's server rows, and the difference of each to plain RRF
on the same questions, to the table.
"""

import argparse
import json
import logging
import math
import random
import re
import statistics
import sys
import tempfile
import time
import zipfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypedDict

import anyio
import numpy as np
from mcp import Client
from mcp.types import TextContent

from bench.shared.harness import count_tokens
from obsidian_mcp.config import Settings
from obsidian_mcp.index.embedder import Embedder
from obsidian_mcp.index.recipe import TextRole
from obsidian_mcp.memory.model import IdMaker, Memory, encode
from obsidian_mcp.opening import model_loader
from obsidian_mcp.server import build_server

DEV = ("26", "30", "41", "42", "43")
HELD_OUT = ("44", "47", "48", "49", "50")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
LIMIT = 10
MEMORY_PATH = "obsidian-mcp/memory.jsonl"
_FOLDER = "data/multimodal_dialog/locomo10_v2/"
_TURN_ID = re.compile(r"D\d+:\d+")
_WORD = re.compile(r"\w+")
_BM25_K1, _BM25_B = 1.2, 0.75
_RRF_K = 60
_RESAMPLES = 2000
METRICS = ("any@1", "any@5", "all@5", "any@10", "MRR@10")


@dataclass(frozen=True, slots=True)
class Turn:
    conversation: str
    turn_id: str
    content: str
    # The session's date, ISO.
    occurred: str


@dataclass(frozen=True, slots=True)
class Question:
    conversation: str
    text: str
    category: int
    evidence: frozenset[str]


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    turns: list[Turn]
    questions: list[Question]
    # Questions of categories 1-4 left out: their evidence ids are missing or malformed.
    skipped: int


def session_date(text: str) -> str:
    """'1:56 pm on 8 May, 2023' -> '2023-05-08'."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").date().isoformat()


def parse_conversation(conversation_id: str, data: Mapping[str, object]) -> Conversation:
    """A LoCoMo conversation's turns as memories and its answerable questions."""
    turns: list[Turn] = []
    numbers = sorted(
        int(key.removeprefix("session_"))
        for key in data
        if re.fullmatch(r"session_\d+", key) and data[key]
    )
    for number in numbers:
        occurred = session_date(str(data[f"session_{number}_date_time"]))
        session = data[f"session_{number}"]
        assert isinstance(session, list)
        for turn in session:
            content = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                content += f" [shares {turn['blip_caption']}]"
            turns.append(Turn(conversation_id, str(turn["dia_id"]), content, occurred))
    known = {turn.turn_id for turn in turns}
    questions: list[Question] = []
    skipped = 0
    qa = data["qa"]
    assert isinstance(qa, list)
    for row in qa:
        if row["category"] not in CATEGORIES:
            continue
        evidence = [str(e) for e in row.get("evidence") or []]
        if not evidence or not all(_TURN_ID.fullmatch(e) and e in known for e in evidence):
            skipped += 1
            continue
        questions.append(
            Question(conversation_id, str(row["question"]), row["category"], frozenset(evidence))
        )
    return Conversation(conversation_id, turns, questions, skipped)


def load_conversations(path: Path, wanted: Sequence[str]) -> list[Conversation]:
    """The `wanted` conversations of locomo10.zip at `path`; exits with a message saying
    where to get it when it is not there."""
    if not path.is_file():
        sys.exit(
            f"No LoCoMo data at {path}. Get data/locomo10.zip from the public repository "
            "github.com/snap-research/locomo (it has no licence file, so this project does "
            "not ship it) and pass its path with --data."
        )
    with zipfile.ZipFile(path) as archive:
        found = {
            Path(name).stem: name
            for name in archive.namelist()
            if name.startswith(_FOLDER) and name.endswith(".json")
        }
        missing = [c for c in wanted if c not in found]
        if missing:
            sys.exit(f"{path} lacks conversations {', '.join(missing)} under {_FOLDER}.")
        return [parse_conversation(c, json.loads(archive.read(found[c]))) for c in wanted]


# -- scoring -------------------------------------------------------------------------------


def question_scores(ranked: Sequence[str], evidence: frozenset[str]) -> dict[str, float]:
    """Every metric of one question, from the turn ids returned, best first."""
    first = next((n for n, turn in enumerate(ranked[:LIMIT], 1) if turn in evidence), None)
    return {
        "any@1": float(first is not None and first <= 1),
        "any@5": float(first is not None and first <= 5),
        "all@5": float(evidence <= set(ranked[:5])),
        "any@10": float(first is not None),
        "MRR@10": 1 / first if first is not None else 0.0,
    }


def interval(values: Sequence[float], seed: int = 0) -> tuple[float, float, float]:
    """Mean and 95% bootstrap interval (percentiles of resampled means)."""
    data = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), (_RESAMPLES, len(data)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(data.mean()), float(low), float(high)


# -- the references ------------------------------------------------------------------------


def words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def bm25_ranking(documents: Sequence[str], query: str) -> list[int]:
    """Okapi BM25 (k1 1.2, b 0.75, idf ln(1 + (N - n + 0.5) / (n + 0.5))): the indexes of
    the documents holding a query word, best first (ties: earlier first)."""
    bags = [Counter(words(d)) for d in documents]
    average = sum(sum(bag.values()) for bag in bags) / max(len(bags), 1)
    frequency = Counter(term for bag in bags for term in bag)
    scores = [0.0] * len(bags)
    for term in set(words(query)):
        held = frequency[term]
        if not held:
            continue
        idf = math.log(1 + (len(bags) - held + 0.5) / (held + 0.5))
        for n, bag in enumerate(bags):
            tf = bag[term]
            if tf:
                length = sum(bag.values())
                norm = _BM25_K1 * (1 - _BM25_B + _BM25_B * length / average)
                scores[n] += idf * tf * (_BM25_K1 + 1) / (tf + norm)
    hits = [n for n, score in enumerate(scores) if score > 0]
    return sorted(hits, key=lambda n: (-scores[n], n))


def rrf(rankings: Iterable[Sequence[int]]) -> list[int]:
    """Reciprocal-rank fusion, equal weights, k = 60 (ties: earlier first)."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, 1):
            fused[item] = fused.get(item, 0.0) + 1 / (_RRF_K + rank)
    return sorted(fused, key=lambda n: (-fused[n], n))


def reference_rankings(conversation: Conversation, model: Embedder) -> dict[str, list[list[int]]]:
    """For each question of the conversation, each reference's ranking of its turns."""
    documents = [turn.content for turn in conversation.turns]
    vectors = model.embed(documents, TextRole.DOCUMENT)
    queries = model.embed([q.text for q in conversation.questions], TextRole.QUERY)
    out: dict[str, list[list[int]]] = {"BM25": [], "MiniLM": [], "RRF": []}
    for n, question in enumerate(conversation.questions):
        lexical = bm25_ranking(documents, question.text)
        similarity = vectors @ queries[n]
        dense = [int(i) for i in np.argsort(-similarity, kind="stable")]
        out["BM25"].append(lexical[:LIMIT])
        out["MiniLM"].append(dense[:LIMIT])
        out["RRF"].append(rrf([lexical, dense])[:LIMIT])
    return out


# -- the server ----------------------------------------------------------------------------


def write_memories(target: Path, conversations: Sequence[Conversation]) -> dict[str, str]:
    """The memory file with every turn, written one after another a second apart; the turn
    id ("<conversation>/<turn>") of each memory id."""
    ids = IdMaker(random.Random(37))
    start = datetime.now(UTC) - timedelta(days=1)
    turn_of: dict[str, str] = {}
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as out:
        n = 0
        for conversation in conversations:
            for turn in conversation.turns:
                ts = start + timedelta(seconds=n)
                n += 1
                memory_id = ids.make(ts)
                turn_of[memory_id] = f"{conversation.id}/{turn.turn_id}"
                memory = Memory(
                    memory_id,
                    ts,
                    turn.content,
                    (conversation.id,),
                    "",
                    scope=conversation.id,
                    occurred=turn.occurred,
                )
                out.write(encode(memory))
    return turn_of


def reply_text(result: object) -> str:
    content = getattr(result, "content", [])
    return "\n".join(block.text for block in content if isinstance(block, TextContent))


@dataclass(frozen=True, slots=True)
class ServerAnswer:
    # Turn ids ("<conversation>/<turn>"), best first.
    ranked: list[str]
    tokens: int
    seconds: float


# An entry of a recall reply starts "- <id> ", the id by its shortest unique ending.
_ENTRY_ID = re.compile(r"^- (\S+) ", re.MULTILINE)


def ids_by_ending(ids: Iterable[str]) -> dict[str, str]:
    """Each id by itself and by every ending it alone has (what a reply may show of it)."""
    owners: dict[str, set[str]] = {}
    for memory_id in ids:
        for start in range(len(memory_id)):
            owners.setdefault(memory_id[start:], set()).add(memory_id)
    return {ending: next(iter(held)) for ending, held in owners.items() if len(held) == 1}


async def ask_server(
    root: Path, conversations: Sequence[Conversation], turn_of: Mapping[str, str]
) -> list[ServerAnswer]:
    """Every question through an MCP client of the server, once its vectors are current."""
    settings = Settings(
        vault_path=root / "vault",
        config_dir=root / "config",
        cache_dir=root / "cache",
        api_key=None,
    )
    whole_id = ids_by_ending(turn_of)
    answers: list[ServerAnswer] = []
    async with Client(build_server(settings), raise_exceptions=True) as client:
        began = time.perf_counter()
        probe = {"query": "hello", "format": "json", "limit": 1}
        while "meaning" in json.loads(reply_text(await client.call_tool("vault_recall", probe))):
            await anyio.sleep(0.5)  # the background embedding of every memory
        print(f"server vectors current after {time.perf_counter() - began:.0f} s", flush=True)
        for conversation in conversations:
            for question in conversation.questions:
                arguments = {"query": question.text, "scope": conversation.id, "limit": LIMIT}
                began = time.perf_counter()
                result = await client.call_tool("vault_recall", arguments)
                seconds = time.perf_counter() - began
                text = reply_text(result)
                shown = _ENTRY_ID.findall(text)
                ranked = [turn_of[whole_id[i]] for i in shown if i in whole_id]
                answers.append(ServerAnswer(ranked, count_tokens(text), seconds))
    return answers


# -- the run -------------------------------------------------------------------------------


class Asked(TypedDict):
    conversation: str
    category: int
    question: str
    # Turn ids ("<conversation>/<turn>").
    evidence: list[str]


@dataclass(frozen=True, slots=True)
class Run:
    """Per question (in order): its conversation, category and evidence; each system's
    ranked turn ids ("<conversation>/<turn>"); the server's tokens and seconds, and each
    reference's tokens."""

    questions: list[Asked]
    ranked: dict[str, list[list[str]]]
    tokens: dict[str, list[int]]
    seconds: list[float]


async def run(data: Path, wanted: Sequence[str]) -> Run:
    conversations = load_conversations(data, wanted)
    turns = sum(len(c.turns) for c in conversations)
    asked = sum(len(c.questions) for c in conversations)
    skipped = sum(c.skipped for c in conversations)
    print(
        f"conversations {', '.join(wanted)}: {turns:,} turns, {asked:,} questions "
        f"({skipped} skipped for malformed evidence)",
        flush=True,
    )
    load = model_loader(Settings())
    assert load is not None, "the bundled embedding model is not installed"
    model = load()
    ranked: dict[str, list[list[str]]] = {"BM25": [], "MiniLM": [], "RRF": []}
    tokens: dict[str, list[int]] = {"BM25": [], "MiniLM": [], "RRF": []}
    for conversation in conversations:
        for name, rankings in reference_rankings(conversation, model).items():
            for ranking in rankings:
                shown = [conversation.turns[n] for n in ranking]
                ranked[name].append([f"{conversation.id}/{t.turn_id}" for t in shown])
                tokens[name].append(count_tokens("\n".join(t.content for t in shown)))
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        turn_of = write_memories(root / "vault" / MEMORY_PATH, conversations)
        answers = await ask_server(root, conversations, turn_of)
    ranked["vault_recall"] = [a.ranked for a in answers]
    tokens["vault_recall"] = [a.tokens for a in answers]
    questions: list[Asked] = [
        {
            "conversation": q.conversation,
            "category": q.category,
            "question": q.text,
            "evidence": sorted(f"{q.conversation}/{e}" for e in q.evidence),
        }
        for c in conversations
        for q in c.questions
    ]
    return Run(questions, ranked, tokens, [a.seconds for a in answers])


def scores_of(run: Run, system: str) -> list[dict[str, float]]:
    return [
        question_scores(ranked, frozenset(q["evidence"]))
        for ranked, q in zip(run.ranked[system], run.questions, strict=True)
    ]


def table(run: Run, before: Run | None) -> str:
    systems = [(name, run, name) for name in ("vault_recall", "BM25", "MiniLM", "RRF")]
    if before is not None:
        systems.insert(0, ("vault_recall before", before, "vault_recall"))
    groups: list[tuple[str, int | None]] = [("overall", None)]
    groups += [(name, number) for number, name in CATEGORIES.items()]
    lines: list[str] = []
    for group, category in groups:
        chosen = [
            n for n, q in enumerate(run.questions) if category is None or q["category"] == category
        ]
        lines += ["", f"### {group}, {len(chosen):,} questions", ""]
        lines.append("| system | " + " | ".join(METRICS) + " | tokens per recall |")
        lines.append("|---|" + "---|" * (len(METRICS) + 1))
        reference = scores_of(run, "RRF")
        for label, source, system in systems:
            scores = scores_of(source, system)
            cells: list[str] = []
            for metric in METRICS:
                scale = 1 if metric == "MRR@10" else 100
                mean, low, high = interval([scores[n][metric] * scale for n in chosen])
                digits = 3 if metric == "MRR@10" else 1
                cells.append(f"{mean:.{digits}f} ({low:.{digits}f}-{high:.{digits}f})")
            mean_tokens = statistics.mean(source.tokens[system][n] for n in chosen)
            lines.append(f"| {label} | " + " | ".join(cells) + f" | {mean_tokens:.0f} |")
            if system == "vault_recall":
                cells = []
                for metric in METRICS:
                    scale = 1 if metric == "MRR@10" else 100
                    differences = [
                        (scores[n][metric] - reference[n][metric]) * scale for n in chosen
                    ]
                    mean, low, high = interval(differences)
                    digits = 3 if metric == "MRR@10" else 1
                    cells.append(f"{mean:+.{digits}f} ({low:+.{digits}f} to {high:+.{digits}f})")
                lines.append(f"| {label} minus RRF | " + " | ".join(cells) + " | |")
    for label, source, system in systems:
        if system != "vault_recall" or not source.seconds:
            continue
        ordered = sorted(source.seconds)
        p95 = ordered[max(math.ceil(len(ordered) * 0.95) - 1, 0)]
        lines.append(
            f"\n{label}: latency p50 {statistics.median(ordered) * 1000:.1f} ms, "
            f"p95 {p95 * 1000:.1f} ms over {len(ordered):,} recalls"
        )
    return "\n".join(lines)


def save(run: Run, path: Path) -> None:
    path.write_text(
        json.dumps(
            {
                "questions": run.questions,
                "ranked": run.ranked,
                "tokens": run.tokens,
                "seconds": run.seconds,
            }
        ),
        "utf-8",
    )


def read_run(path: Path) -> Run:
    data = json.loads(path.read_text("utf-8"))
    return Run(data["questions"], data["ranked"], data["tokens"], data["seconds"])


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    parser = argparse.ArgumentParser(description="LoCoMo turn-level retrieval benchmark.")
    parser.add_argument("--data", type=Path, required=True, help="path of locomo10.zip")
    parser.add_argument(
        "--conversations",
        choices=("dev", "held-out", "all"),
        default="dev",
        help="the development conversations (default), the held-out ones, or all ten",
    )
    parser.add_argument("--save", type=Path, help="keep every question's ranks here (JSON)")
    parser.add_argument("--before", type=Path, help="a saved run to show beside this one")
    args = parser.parse_args()
    wanted = {"dev": DEV, "held-out": HELD_OUT, "all": DEV + HELD_OUT}[args.conversations]
    before = read_run(args.before) if args.before else None
    result = anyio.run(run, args.data, wanted)
    if before is not None and before.questions != result.questions:
        sys.exit(f"{args.before} asked other questions; run it on the same conversations.")
    if args.save:
        save(result, args.save)
    print(table(result, before))


if __name__ == "__main__":
    main()
