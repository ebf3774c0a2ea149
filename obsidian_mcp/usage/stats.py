# pyright: strict
"""The usage log read back into figures: what `obsidian-mcp stats` shows.

Reading is forgiving: a line that is not a whole log record (torn by a crash or a full
disk, cut by a truncation, written by a newer version) is skipped and counted, never
fatal. Figures:

- per tool: calls, errors, reply tokens and milliseconds (count, median, p90, total; the
  percentiles interpolate between closest ranks, as the benchmark's do);
- errors by kind, with the tools they came from;
- the tool definitions' cost: a client sends them with every request, and a session of
  n calls makes at least n + 1 requests (each call is asked for by one, and the answer
  after the last call is one more), so the estimate is (n + 1) x the definitions' tokens
  per session, a lower bound;
- follow-up signals of retrieval misses (`follow_ups`);
- with several vaults, the calls, tokens and misses of each (a call over several vaults
  counts under each one it worked on).
"""

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Self, cast

from obsidian_mcp.usage.log import LogFiles
from obsidian_mcp.usage.record import QUESTION_ARGUMENTS

# The tools that search the vault by words, whose misses the follow-ups look for.
SEARCH_TOOLS = frozenset(
    {"vault_semantic_query", "vault_smart_search", "vault_quick_context", "vault_search_map"}
)
# The tools that open one note.
READ_TOOLS = frozenset({"vault_read_note", "vault_peek_file"})


@dataclass(frozen=True)
class LoggedCall:
    """One line of the log, as far as the figures need it."""

    at: datetime
    session: str
    tool: str
    mode: str
    tokens: int
    ms: float
    error: str | None
    items: int | None
    notes: tuple[str, ...]  # the notes returned (paths with `full`, else hashes)
    words: frozenset[str]  # the question's words (hashed with `on`)
    question: str | None  # the question as asked: `full` only
    definitions: int  # tokens of the tool list sent with each request
    vaults: tuple[str, ...] = ()  # the vaults it worked on, with several configured


@dataclass(frozen=True)
class LogContents:
    calls: list[LoggedCall]
    files: list[str]
    lines: int
    skipped: int


def _call(line: bytes) -> LoggedCall | None:
    try:
        data = json.loads(line)
        if not isinstance(data, dict):
            return None
        row = cast(dict[str, Any], data)
        at = datetime.fromisoformat(str(row["at"]))
        if at.tzinfo is None:
            return None
        mode = str(row["mode"])
        texts = cast(dict[str, object], row.get("text") or {})
        question = next(
            (v for name in QUESTION_ARGUMENTS if isinstance(v := texts.get(name), str)), None
        )
        items = row.get("items")
        notes = cast(list[list[str]], row.get("notes") or [])
        vaults: object = row.get("vaults") or []
        if not isinstance(vaults, list):
            return None
        return LoggedCall(
            at=at,
            session=str(row["session"]),
            tool=str(row["tool"]),
            mode=mode,
            tokens=int(row["tokens"]),
            ms=float(row["ms"]),
            error=None if row.get("error") is None else str(row["error"]),
            items=None if items is None else int(items),
            notes=tuple(str(note[0]) for note in notes),
            words=frozenset(str(word) for word in cast(list[object], row.get("words") or [])),
            question=question if mode == "full" else None,
            definitions=int(row.get("defs") or 0),
            vaults=tuple(str(name) for name in cast(list[object], vaults)),
        )
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def read_log(files: LogFiles) -> LogContents:
    """Every whole record of the log's files, oldest first; other lines are counted."""
    calls: list[LoggedCall] = []
    found: list[str] = []
    lines = skipped = 0
    for path in files.in_order:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        found.append(str(path))
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            lines += 1
            call = _call(line)
            if call is None:
                skipped += 1
            else:
                calls.append(call)
    return LogContents(calls, found, lines, skipped)


def percentile(values: Sequence[float], pct: float) -> float:
    """Linear interpolation between closest ranks; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class Spread:
    count: int
    median: float
    p90: float
    total: float

    @classmethod
    def of(cls, values: Sequence[float]) -> "Spread":
        return cls(len(values), percentile(values, 50), percentile(values, 90), sum(values))


@dataclass(frozen=True)
class CallFigures:
    calls: int
    errors: int
    tokens: Spread
    ms: Spread

    @classmethod
    def of(cls, made: Sequence[LoggedCall], **name: str) -> Self:
        """The figures of the calls `made`; `name` names what they share (tool=, vault=)."""
        return cls(
            len(made),
            sum(call.error is not None for call in made),
            Spread.of([call.tokens for call in made]),
            Spread.of([call.ms for call in made]),
            **name,
        )


@dataclass(frozen=True)
class ToolFigures(CallFigures):
    tool: str


@dataclass(frozen=True)
class VaultFigures(CallFigures):
    vault: str


@dataclass(frozen=True)
class ErrorFigures:
    kind: str
    count: int
    tools: dict[str, int]


@dataclass(frozen=True)
class DefinitionsCost:
    tokens_per_request: int  # the latest session's
    requests: int  # at least: calls + one per session
    tokens: int


@dataclass(frozen=True)
class Miss:
    """A search that looks missed, with what the agent did next (`full` logs only)."""

    at: str
    tool: str
    question: str
    searched_again: str | None
    read_elsewhere: tuple[str, ...]


@dataclass
class FollowUpCounts:
    searches: int = 0
    # The next search of the session was on similar words.
    searched_again: int = 0
    # Before the next search, the agent opened a note this search had not returned.
    read_elsewhere: int = 0
    # Either of the two.
    missed: int = 0
    # Answered without error but returned nothing.
    empty: int = 0


@dataclass(frozen=True)
class FollowUps:
    total: FollowUpCounts
    by_tool: dict[str, FollowUpCounts]
    misses: list[Miss] = field(default_factory=list[Miss])
    by_vault: dict[str, FollowUpCounts] = field(default_factory=dict[str, FollowUpCounts])

    def of_vault(self, vault: str) -> FollowUpCounts:
        """The vault's counts; zeros for a vault the calls used but did not search."""
        return self.by_vault.get(vault, FollowUpCounts())


@dataclass(frozen=True)
class DayFigures:
    day: str
    calls: int
    tokens: int


@dataclass(frozen=True)
class UsageStats:
    since: str | None
    first: str | None
    last: str | None
    calls: int
    sessions: int
    tokens: int
    tools: list[ToolFigures]
    # Empty unless calls name their vaults (several configured).
    vaults: list[VaultFigures]
    errors: list[ErrorFigures]
    definitions: DefinitionsCost
    follow_ups: FollowUps
    days: list[DayFigures]
    log: LogContents

    def data(self) -> dict[str, Any]:
        """The figures as JSON-ready data (NaN, for no values, as null)."""

        def clean(value: object) -> object:
            if isinstance(value, float) and math.isnan(value):
                return None
            if isinstance(value, dict):
                entries = cast(dict[str, object], value)
                return {key: clean(item) for key, item in entries.items()}
            if isinstance(value, list | tuple):
                items = cast(Iterable[object], value)
                return [clean(item) for item in items]
            if isinstance(value, datetime):
                return value.isoformat()
            return value

        tools = {t.tool: asdict(t) for t in self.tools}
        vaults = {
            v.vault: {**asdict(v), "follow_ups": asdict(self.follow_ups.of_vault(v.vault))}
            for v in self.vaults
        }
        return cast(
            dict[str, Any],
            clean(
                {
                    "since": self.since,
                    "first": self.first,
                    "last": self.last,
                    "calls": self.calls,
                    "sessions": self.sessions,
                    "tokens": self.tokens,
                    "tools": tools,
                    "vaults": vaults,
                    "errors": {e.kind: {"count": e.count, "tools": e.tools} for e in self.errors},
                    "definitions": asdict(self.definitions),
                    "follow_ups": {
                        **asdict(self.follow_ups.total),
                        "by_tool": {k: asdict(v) for k, v in self.follow_ups.by_tool.items()},
                        "misses": [asdict(miss) for miss in self.follow_ups.misses],
                    },
                    "days": [asdict(day) for day in self.days],
                    "log": {
                        "files": self.log.files,
                        "lines": self.log.lines,
                        "skipped": self.log.skipped,
                    },
                }
            ),
        )


def similar_words(first: frozenset[str], second: frozenset[str]) -> bool:
    """Two questions on similar words: at least half the words of the shorter in common."""
    if not first or not second:
        return False
    return 2 * len(first & second) >= min(len(first), len(second))


def follow_ups(calls: Sequence[LoggedCall]) -> FollowUps:
    """The follow-up signals of each session's searches. A search's window lasts until
    the session's next search: it counts as searched again when that next search is on
    similar words (`similar_words`), and as read elsewhere when a read in its window
    (vault_read_note, vault_peek_file) opened a note the search had not returned."""
    total = FollowUpCounts()
    by_tool: dict[str, FollowUpCounts] = defaultdict(FollowUpCounts)
    by_vault: dict[str, FollowUpCounts] = defaultdict(FollowUpCounts)
    misses: list[Miss] = []
    sessions: dict[str, list[LoggedCall]] = defaultdict(list)
    for call in calls:
        sessions[call.session].append(call)
    for session in sessions.values():
        searches = [i for i, call in enumerate(session) if call.tool in SEARCH_TOOLS]
        for number, start in enumerate(searches):
            search = session[start]
            end = searches[number + 1] if number + 1 < len(searches) else len(session)
            following = session[end] if end < len(session) else None
            again = following is not None and similar_words(search.words, following.words)
            returned = set(search.notes)
            elsewhere = tuple(
                dict.fromkeys(
                    note
                    for call in session[start + 1 : end]
                    if call.tool in READ_TOOLS
                    for note in call.notes
                    if note not in returned
                )
            )
            empty = search.error is None and search.items == 0
            for counts in (total, by_tool[search.tool], *(by_vault[v] for v in search.vaults)):
                counts.searches += 1
                counts.searched_again += again
                counts.read_elsewhere += bool(elsewhere)
                counts.missed += again or bool(elsewhere)
                counts.empty += empty
            if (again or elsewhere) and search.question is not None:
                misses.append(
                    Miss(
                        search.at.isoformat(timespec="seconds"),
                        search.tool,
                        search.question,
                        following.question if again and following else None,
                        elsewhere,
                    )
                )
    return FollowUps(total, dict(sorted(by_tool.items())), misses, dict(sorted(by_vault.items())))


def usage_stats(log: LogContents, since: datetime | None = None) -> UsageStats:
    """The figures of the calls made at or after `since` (all of them: None)."""
    calls = [call for call in log.calls if since is None or call.at >= since]
    per_tool: dict[str, list[LoggedCall]] = defaultdict(list)
    per_session: dict[str, list[LoggedCall]] = defaultdict(list)
    per_day: dict[str, list[LoggedCall]] = defaultdict(list)
    per_vault: dict[str, list[LoggedCall]] = defaultdict(list)
    for call in calls:
        per_tool[call.tool].append(call)
        for vault in call.vaults:
            per_vault[vault].append(call)
        per_session[call.session].append(call)
        per_day[call.at.astimezone().date().isoformat()].append(call)
    tools = sorted(
        (ToolFigures.of(made, tool=tool) for tool, made in per_tool.items()),
        key=lambda figures: (-figures.calls, figures.tool),
    )
    vaults = sorted(
        (VaultFigures.of(made, vault=vault) for vault, made in per_vault.items()),
        key=lambda figures: (-figures.calls, figures.vault),
    )
    kinds: dict[str, Counter[str]] = defaultdict(Counter)
    for call in calls:
        if call.error is not None:
            kinds[call.error][call.tool] += 1
    errors = sorted(
        (ErrorFigures(kind, sum(c.values()), dict(c.most_common())) for kind, c in kinds.items()),
        key=lambda figures: (-figures.count, figures.kind),
    )
    requests = sum(len(made) + 1 for made in per_session.values())
    spent = sum((len(made) + 1) * made[-1].definitions for made in per_session.values())
    latest = max(calls, key=lambda call: call.at).definitions if calls else 0
    ordered = sorted(call.at for call in calls)
    return UsageStats(
        since=since.isoformat() if since is not None else None,
        first=ordered[0].isoformat() if ordered else None,
        last=ordered[-1].isoformat() if ordered else None,
        calls=len(calls),
        sessions=len(per_session),
        tokens=sum(call.tokens for call in calls),
        tools=tools,
        vaults=vaults,
        errors=errors,
        definitions=DefinitionsCost(latest, requests, spent),
        follow_ups=follow_ups(calls),
        days=[
            DayFigures(day, len(made), sum(call.tokens for call in made))
            for day, made in sorted(per_day.items())
        ],
        log=log,
    )
