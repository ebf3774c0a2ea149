"""A question asked as an agent asks it, call by call, and what the agent read.

``run_traced`` runs one strategy over the questions through a ``Recorder`` (a session that
keeps every call) and gives each question a ``Trace``: hit after the first response, within
two calls (the second being the ``vault_read_note`` the first response suggests, made only
on a miss), tokens up to the call that showed the answer. The retrieval figures per vault
and per stage switched off, and the context economy's strategies, are all made of traces.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.retrieval.strategies import Outcome, json_strings, semantic_runner
from bench.shared.harness import CallResult, Question, Session, is_hit

READ_NOTE = "vault_read_note"
_READ_HINT = re.compile(
    r'vault_read_note\(path=("(?:[^"\\]|\\.)*")(?:, heading=("(?:[^"\\]|\\.)*"))?\)'
)


@dataclass
class Recorder(Session):
    """A session that keeps every call it makes: `log` per question, `history` all along
    (what the usage log must agree with)."""

    log: list[tuple[str, dict[str, Any], CallResult]] = field(default_factory=list)
    history: list[tuple[str, dict[str, Any], CallResult]] = field(default_factory=list)

    async def call(
        self, tool: str, arguments: dict[str, Any], *, progress: bool = False
    ) -> CallResult:
        result = await super().call(tool, arguments, progress=progress)
        self.log.append((tool, arguments, result))
        self.history.append((tool, arguments, result))
        return result

    def take(self) -> list[CallResult]:
        """The counted calls since the last take (navigation-only JSON calls left out)."""
        calls = [result for _, args, result in self.log if args.get("format") != "json"]
        self.log.clear()
        return calls


@dataclass
class Trace:
    question: str
    category: str
    hit_first: bool
    hit_two: bool
    hit: bool
    tokens: int  # up to and including the call that showed the answer; all on a miss
    first_tokens: int  # of the first response alone
    calls: int
    texts: list[str]
    error: str = ""


def readable(text: str) -> str:
    """The response and, when it is JSON, the strings inside it as an agent reads them."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    return text + "\n" + "\n".join(json_strings(data))


def trace(question: Question, calls: Sequence[CallResult], error: str = "") -> Trace:
    shown: list[str] = []
    answered_at: int | None = None
    for index, call in enumerate(calls):
        shown.append(readable(call.text))
        if is_hit("\n".join(shown), question.gold):
            answered_at = index + 1
            break
    used = answered_at or len(calls)
    return Trace(
        question.id,
        question.category,
        answered_at == 1,
        answered_at is not None and answered_at <= 2,
        answered_at is not None,
        sum(call.tokens for call in calls[:used]),
        calls[0].tokens if calls else 0,
        used,
        [call.text for call in calls[:used]],
        error,
    )


def suggested_read(text: str) -> dict[str, Any] | None:
    """The first ``vault_read_note(...)`` call a response suggests, as arguments."""
    match = _READ_HINT.search(text)
    if match is None:
        return None
    args: dict[str, Any] = {"path": json.loads(match.group(1))}
    if match.group(2):
        args["heading"] = json.loads(match.group(2))
    return args


async def follow_hint(session: Session, question: Question, first: CallResult) -> None:
    """The second call of our strategies: only on a miss, the read the response suggests."""
    if is_hit(readable(first.text), question.gold):
        return
    args = suggested_read(first.text)
    if args is not None:
        await session.call(READ_NOTE, args)


Step = Callable[[Question], Awaitable[Outcome | None]]


async def run_traced(
    name: str, recorder: Recorder, step: Step, questions: Sequence[Question]
) -> tuple[list[Trace], list[Outcome]]:
    """Run one strategy over the questions; one failing question never hides the rest."""
    traces: list[Trace] = []
    outcomes: list[Outcome] = []
    for question in questions:
        recorder.log.clear()
        try:
            outcome = await step(question)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"[:200]
            traces.append(trace(question, recorder.take(), error))
            outcomes.append(Outcome(question.id, question.category, False, 0, 0, 0.0, error=error))
            continue
        calls = recorder.take()
        error = next((c.text[:200] for c in calls if c.is_error), "")
        traces.append(trace(question, calls, error))
        if outcome is not None:
            outcomes.append(outcome)
    hits = sum(t.hit for t in traces)
    errors = sum(1 for t in traces if t.error)
    print(
        f"  {name}: {hits}/{len(traces)} answered" + (f", {errors} with errors" if errors else ""),
        flush=True,
    )
    return traces, outcomes


def semantic_step(recorder: Recorder) -> Step:
    first_call = semantic_runner(recorder)

    async def step(question: Question) -> Outcome:
        outcome = await first_call(question)
        await follow_hint(recorder, question, recorder.log[-1][2])
        return outcome

    return step
