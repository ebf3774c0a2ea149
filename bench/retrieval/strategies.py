"""How each strategy asks a question, and what one answer counts: hit, tokens, calls, time.

The strategies of ``bench.retrieval.quality`` and ``bench.economy.context`` are built from
these runners: ``vault_semantic_query`` (``semantic_runner``), the drill-down an agent does
without it (``drill_down_runner``: map, map again, peek, read the top file) and the raw REST
search plus whole note (``simple_search_runner``). Each returns an ``Outcome``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from bench.shared.harness import (
    KeywordPicker,
    Question,
    Session,
    count_tokens,
    is_hit,
)

SEMANTIC_TOOL = "vault_semantic_query"
MAX_MAP_CALLS = 4  # a drill-down descends through at most this many folder levels


@dataclass
class Outcome:
    question: str
    category: str
    hit: bool
    tokens: int
    calls: int
    seconds: float
    labelled_fallback: bool = False
    error: str = ""
    # What the agent read (all responses, in call order), kept in the JSON for inspection.
    response: str = ""


Runner = Callable[[Question], Awaitable[Outcome]]


def describe(exc: BaseException) -> str:
    """The innermost error, for a report cell (task groups wrap what actually failed)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:200]


def _semantic_args(question: Question) -> dict[str, Any]:
    args: dict[str, Any] = {"query": question.question}
    if question.folder:
        args["folder"] = question.folder
    return args


def semantic_runner(session: Session) -> Runner:
    async def run(question: Question) -> Outcome:
        result = await session.call(SEMANTIC_TOOL, _semantic_args(question))
        return Outcome(
            question.id,
            question.category,
            is_hit(result.text, question.gold),
            result.tokens,
            1,
            result.seconds,
            "lexical-fallback" in result.text,
            result.text[:200] if result.is_error else "",
            result.text,
        )

    return run


async def _map_rows(session: Session, keywords: str, folder: str) -> tuple[str, list[dict]]:
    """One counted search-map call (markdown, as an agent sees it) and its rows (JSON,
    read for navigation only, not counted)."""
    shown = await session.call("vault_search_map", {"query": keywords, "folder": folder})
    if shown.is_error:
        return shown.text, []
    data = await session.call(
        "vault_search_map", {"query": keywords, "folder": folder, "format": "json"}
    )
    return shown.text, json.loads(data.text).get("rows", [])


_CONTINUE_RE = re.compile(r"offset=(\d+)\)\]$")


async def read_whole_note(session: Session, path: str) -> list[str]:
    """`vault_read_note` of a whole note, following its continuation hints, as an agent
    without passage search reads the file it drilled down to."""
    texts: list[str] = []
    offset: int | None = 0
    while offset is not None:
        text = (await session.call("vault_read_note", {"path": path, "offset": offset})).text
        texts.append(text)
        more = _CONTINUE_RE.search(text)
        offset = int(more.group(1)) if more else None
    return texts


def drill_down_runner(session: Session, picker: KeywordPicker) -> Runner:
    async def run(question: Question) -> Outcome:
        keywords = picker.pick(question.question)
        started = time.perf_counter()
        texts: list[str] = []
        folder = question.folder or ""
        text, rows = await _map_rows(session, keywords, folder)
        texts.append(text)
        while rows and rows[0].get("is_folder") and len(texts) < MAX_MAP_CALLS:
            text, rows = await _map_rows(session, keywords, rows[0]["path"])
            texts.append(text)
        if rows and not rows[0].get("is_folder"):
            top = rows[0]["path"]
            texts.append((await session.call("vault_peek_file", {"path": top})).text)
            texts += await read_whole_note(session, top)
        joined = "\n".join(texts)
        return Outcome(
            question.id,
            question.category,
            is_hit(joined, question.gold),
            sum(count_tokens(t) for t in texts),
            len(texts),
            time.perf_counter() - started,
            response=joined,
        )

    return run


def json_strings(value: Any) -> list[str]:
    """Every string inside decoded JSON, as an agent reads them."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in json_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in json_strings(v)]
    return []


def simple_search_runner(http: httpx.AsyncClient, picker: KeywordPicker) -> Runner:
    async def run(question: Question) -> Outcome:
        keywords = picker.pick(question.question)
        started = time.perf_counter()
        response = await http.post(
            "/search/simple/", params={"query": keywords, "contextLength": 100}
        )
        texts = [response.text]
        hits = response.json() if response.status_code == 200 else []
        shown = response.text + "\n" + "\n".join(json_strings(hits))
        if hits:
            top = max(hits, key=lambda h: h.get("score") or 0)["filename"]
            note = await http.get(f"/vault/{quote(top)}")
            texts.append(note.text)
            shown += "\n" + note.text
        return Outcome(
            question.id,
            question.category,
            is_hit(shown, question.gold),
            sum(count_tokens(t) for t in texts),
            len(texts),
            time.perf_counter() - started,
            response="\n".join(texts),
        )

    return run




async def run_strategy(name: str, runner: Runner, questions: Sequence[Question]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for question in questions:
        try:
            outcomes.append(await runner(question))
        except Exception as exc:  # one failing question must not hide the others' figures
            outcomes.append(
                Outcome(
                    question.id,
                    question.category,
                    False,
                    0,
                    0,
                    0.0,
                    error=describe(exc),
                )
            )
    errors = sum(1 for o in outcomes if o.error)
    print(
        f"  {name}: {sum(o.hit for o in outcomes)}/{len(outcomes)} hits"
        + (f", {errors} errors" if errors else ""),
        flush=True,
    )
    return outcomes


