# pyright: strict
"""The usage figures for people: a terminal table, or one self-contained HTML page with
its charts drawn as inline SVG (no script, no style sheet or font from anywhere else, so
it opens from a file on a machine without a network)."""

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

from obsidian_mcp.text.wording import plural
from obsidian_mcp.usage.stats import FollowUpCounts, UsageStats

# Misses listed in the terminal (the HTML page and --json list them all).
TERMINAL_MISSES = 20
# Chart colours, one per series, chosen apart for colour-blind readers (Tableau 10).
CALLS_COLOUR = "#4e79a7"
ERRORS_COLOUR = "#e15759"
MEDIAN_COLOUR = "#f28e2b"
P90_COLOUR = "#59a14f"
DAY_COLOUR = "#76b7b2"
FOLLOW_UP_COLOUR = "#edc948"


def _number(value: float) -> str:
    if math.isnan(value):
        return "-"
    value = round(value, 1)
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:,.1f}"


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _moment(iso: str | None) -> str:
    if iso is None:
        return "-"
    return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M")


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Aligned columns: the first to the left, the figures to the right."""
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    return [line(headers), *(line(row) for row in rows)]


_TOOL_HEADERS = (
    "tool", "calls", "errors", "tokens median", "p90", "total", "ms median", "p90",
)  # fmt: skip


def _tool_rows(stats: UsageStats) -> list[list[str]]:
    rows = [
        [
            t.tool,
            f"{t.calls:,}",
            f"{t.errors:,}",
            _number(t.tokens.median),
            _number(t.tokens.p90),
            _number(t.tokens.total),
            _number(t.ms.median),
            _number(t.ms.p90),
        ]
        for t in stats.tools
    ]
    errors = sum(t.errors for t in stats.tools)
    rows.append(["all tools", f"{stats.calls:,}", f"{errors:,}", "", "", f"{stats.tokens:,}"])
    return [row + [""] * (len(_TOOL_HEADERS) - len(row)) for row in rows]


_VAULT_HEADERS = ("vault", "calls", "errors", "tokens median", "total", "searches", "missed")
# Said beside the per-vault figures: their calls add up to more than the calls made.
_VAULT_NOTE = "a search over every vault counts under each"


def _vault_rows(stats: UsageStats) -> list[list[str]]:
    rows: list[list[str]] = []
    for v in stats.vaults:
        follow = stats.follow_ups.of_vault(v.vault)
        rows.append(
            [
                v.vault,
                f"{v.calls:,}",
                f"{v.errors:,}",
                _number(v.tokens.median),
                _number(v.tokens.total),
                f"{follow.searches:,}",
                f"{follow.missed:,} ({_share(follow.missed, follow.searches)})",
            ]
        )
    return rows


@dataclass(frozen=True)
class _Signal:
    label: str
    short: str  # for the chart's axis
    count: Callable[[FollowUpCounts], int]


_SIGNALS = (
    _Signal("searched again on similar words", "searched again", lambda c: c.searched_again),
    _Signal(
        "read a note the search had not returned", "read elsewhere", lambda c: c.read_elsewhere
    ),
    _Signal("either of the two", "either", lambda c: c.missed),
    _Signal("returned nothing", "returned nothing", lambda c: c.empty),
)


def _summary(stats: UsageStats) -> str:
    period = f"since {_moment(stats.since)}" if stats.since else "all logged"
    if not stats.calls:
        return f"Usage ({period}): no calls."
    return (
        f"Usage ({period}): {plural(stats.calls, 'call')} in "
        f"{plural(stats.sessions, 'session')}, {plural(stats.tokens, 'reply token')}, from "
        f"{_moment(stats.first)} to {_moment(stats.last)}."
    )


def _log_line(stats: UsageStats) -> str:
    files = " + ".join(reversed(stats.log.files)) or "no log file"
    skipped = stats.log.skipped
    note = f"; {skipped:,} unreadable lines skipped (torn or cut)" if skipped else ""
    return f"Log: {files}, {stats.log.lines:,} lines{note}."


def _definitions_line(stats: UsageStats) -> str:
    cost = stats.definitions
    return (
        f"Tool definitions: {cost.tokens_per_request:,} tokens sent with each request; at "
        f"least {cost.requests:,} requests ({stats.calls:,} calls + one per session): "
        f"~{cost.tokens:,} tokens."
    )


def terminal_report(stats: UsageStats) -> str:
    lines = [_summary(stats), _log_line(stats), ""]
    lines += _table(_TOOL_HEADERS, _tool_rows(stats))
    if stats.vaults:
        lines += ["", f"Per vault ({_VAULT_NOTE}):"]
        lines += _table(_VAULT_HEADERS, _vault_rows(stats))
    lines += ["", "Errors by kind:" if stats.errors else "Errors: none."]
    lines += [
        f"  {e.kind}: {e.count:,} ({', '.join(f'{t} {n:,}' for t, n in e.tools.items())})"
        for e in stats.errors
    ]
    lines += ["", _definitions_line(stats), ""]
    total = stats.follow_ups.total
    lines.append(
        f"Follow-ups of {plural(total.searches, 'search', 'searches')} (signals of retrieval "
        "misses):"
    )
    lines += _table(
        ("  signal", "count", "share"),
        [["  " + s.label, f"{s.count(total):,}", _share(s.count(total), total.searches)]
         for s in _SIGNALS],
    )[1:]  # fmt: skip
    for tool, counts in stats.follow_ups.by_tool.items():
        lines.append(
            f"  {tool}: {plural(counts.searches, 'search', 'searches')}, "
            f"{counts.searched_again:,} searched again, {counts.read_elsewhere:,} read "
            f"elsewhere, {counts.empty:,} empty"
        )
    misses = stats.follow_ups.misses
    if misses:
        shown = "" if len(misses) <= TERMINAL_MISSES else f", the latest {TERMINAL_MISSES}"
        lines += ["", f"Misses (OBSIDIAN_USAGE_LOG=full){shown}:"]
        for miss in misses[-TERMINAL_MISSES:]:
            lines.append(f"  {_moment(miss.at)} {miss.tool}: {miss.question!r}")
            if miss.searched_again is not None:
                lines.append(f"      then searched {miss.searched_again!r}")
            if miss.read_elsewhere:
                lines.append(f"      then read {', '.join(miss.read_elsewhere)}")
    elif total.missed:
        lines += ["", "(OBSIDIAN_USAGE_LOG=full lists the questions and notes of the misses.)"]
    return "\n".join(lines)


# --- HTML ------------------------------------------------------------------------------

_LABEL_WIDTH = 230
_BAR_WIDTH = 420
_VALUE_WIDTH = 90
_BAR_HEIGHT = 14
_GROUP_GAP = 10


@dataclass(frozen=True)
class Series:
    name: str
    colour: str
    values: Sequence[float]


def _legend(series: Sequence[Series], y: int) -> list[str]:
    parts: list[str] = []
    x = _LABEL_WIDTH
    for one in series:
        parts.append(
            f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{one.colour}"/>'
            f'<text x="{x + 16}" y="{y}">{escape(one.name)}</text>'
        )
        x += 30 + 7 * len(one.name)
    return parts


def _figure(title: str, width: int, height: int, parts: Sequence[str]) -> str:
    """A captioned chart; a caption and "No calls." when there is nothing to draw."""
    caption = f"<figure><figcaption>{escape(title)}</figcaption>"
    if not parts:
        return caption + "<p>No calls.</p></figure>"
    return (
        caption + f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">'
        + "".join(parts)
        + "</svg></figure>"
    )


def horizontal_bars(title: str, labels: Sequence[str], series: Sequence[Series]) -> str:
    """A bar per label and series, grouped by label, scaled to the largest value."""
    if not labels:
        return _figure(title, 0, 0, [])
    top = max((v for one in series for v in one.values if not math.isnan(v)), default=0) or 1
    group = len(series) * _BAR_HEIGHT + _GROUP_GAP
    legend = 24 if len(series) > 1 else 0
    height = legend + len(labels) * group
    width = _LABEL_WIDTH + _BAR_WIDTH + _VALUE_WIDTH
    parts = _legend(series, 14) if legend else []
    for row, label in enumerate(labels):
        y = legend + row * group
        parts.append(
            f'<text x="{_LABEL_WIDTH - 8}" y="{y + len(series) * _BAR_HEIGHT / 2 + 4}" '
            f'text-anchor="end">{escape(label)}</text>'
        )
        for n, one in enumerate(series):
            value = one.values[row]
            shown = 0.0 if math.isnan(value) else value
            bar = max(shown / top * _BAR_WIDTH, 1.0 if shown else 0.0)
            top_y = y + n * _BAR_HEIGHT
            parts.append(
                f'<rect x="{_LABEL_WIDTH}" y="{top_y}" width="{bar:.1f}" '
                f'height="{_BAR_HEIGHT - 2}" fill="{one.colour}"/>'
                f'<text x="{_LABEL_WIDTH + bar + 4:.1f}" y="{top_y + _BAR_HEIGHT - 4}">'
                f"{_number(value)}</text>"
            )
    return _figure(title, width, height, parts)


def vertical_bars(title: str, labels: Sequence[str], values: Sequence[float], colour: str) -> str:
    """One bar per label (a day), left to right, scaled to the largest value."""
    if not labels:
        return _figure(title, 0, 0, [])
    plot_height, label_height = 160, 40
    step = max(8, min(40, 720 // len(labels)))
    width = max(step * len(labels) + 60, 200)
    top = max(values) or 1
    parts: list[str] = []
    for n, (label, value) in enumerate(zip(labels, values, strict=True)):
        bar = max(value / top * plot_height, 1.0 if value else 0.0)
        x = 40 + n * step
        parts.append(
            f'<rect x="{x}" y="{plot_height - bar + 10:.1f}" width="{step - 3}" '
            f'height="{bar:.1f}" fill="{colour}"><title>{escape(label)}: '
            f"{_number(value)}</title></rect>"
        )
        if len(labels) <= 14 or n % math.ceil(len(labels) / 14) == 0:
            parts.append(
                f'<text x="{x}" y="{plot_height + 24}" font-size="10">{escape(label[5:])}</text>'
            )
    parts.append(f'<text x="0" y="20" font-size="10">{_number(top)}</text>')
    height = plot_height + label_height
    return _figure(title, width, height, parts)


_FIGURE = re.compile(r"[\d,.%-]*")


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Figures to the right, words to the left."""

    def cell(text: str) -> str:
        kind = ' class="n"' if _FIGURE.fullmatch(text) else ""
        return f"<td{kind}>{escape(text)}</td>"

    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(cell(c) for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:60em;padding:0 1em;
color:#222;background:#fff}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:2em}
figure{margin:1.2em 0}figcaption{font-weight:600;margin-bottom:.4em}
svg text{font:12px system-ui,sans-serif;fill:#333}
table{border-collapse:collapse;margin:.6em 0}
th,td{padding:.2em .7em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
td.n{text-align:right}
.note{color:#555}
"""


def html_report(stats: UsageStats) -> str:
    names = [t.tool for t in stats.tools]
    counts = stats.follow_ups.total
    follow_labels = ["searches", *(s.short for s in _SIGNALS)]
    charts = [
        horizontal_bars(
            "Calls per tool",
            names,
            [
                Series("calls", CALLS_COLOUR, [t.calls for t in stats.tools]),
                Series("errors", ERRORS_COLOUR, [t.errors for t in stats.tools]),
            ],
        ),
        horizontal_bars(
            "Reply tokens per call",
            names,
            [
                Series("median", MEDIAN_COLOUR, [t.tokens.median for t in stats.tools]),
                Series("p90", P90_COLOUR, [t.tokens.p90 for t in stats.tools]),
            ],
        ),
        vertical_bars(
            "Calls per day",
            [d.day for d in stats.days],
            [d.calls for d in stats.days],
            DAY_COLOUR,
        ),
        horizontal_bars(
            "Searches and their follow-ups (signals of retrieval misses)",
            follow_labels if counts.searches else [],
            [
                Series(
                    "searches",
                    FOLLOW_UP_COLOUR,
                    [counts.searches, *(s.count(counts) for s in _SIGNALS)],
                )
            ],
        ),
    ]
    errors = _html_table(
        ["kind", "calls", "tools"],
        [
            [e.kind, f"{e.count:,}", ", ".join(f"{t} {n}" for t, n in e.tools.items())]
            for e in stats.errors
        ],
    )
    misses = _html_table(
        ["when", "tool", "question", "then searched", "then read"],
        [
            [
                _moment(m.at),
                m.tool,
                m.question,
                m.searched_again or "",
                ", ".join(m.read_elsewhere),
            ]
            for m in reversed(stats.follow_ups.misses)
        ],
    )
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>obsidian-mcp usage</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>obsidian-mcp usage</h1>",
        f"<p>{escape(_summary(stats))}</p>",
        f'<p class="note">{escape(_log_line(stats))}</p>',
        *charts[:2],
        _html_table(_TOOL_HEADERS, _tool_rows(stats)),
        *(
            [
                "<h2>Per vault</h2>",
                f'<p class="note">Missed: followed by a search again or a read elsewhere; '
                f"{escape(_VAULT_NOTE)}.</p>",
                _html_table(_VAULT_HEADERS, _vault_rows(stats)),
            ]
            if stats.vaults
            else []
        ),
        charts[2],
        "<h2>Errors by kind</h2>",
        errors if stats.errors else "<p>None.</p>",
        "<h2>Tool definitions</h2>",
        f"<p>{escape(_definitions_line(stats))}</p>",
        "<h2>Follow-ups</h2>",
        '<p class="note">A search counts as searched again when the session\'s next search '
        "was on similar words (half the words of the shorter question in common), and as "
        "read elsewhere when, before the next search, the agent opened a note the search "
        "had not returned.</p>",
        charts[3],
    ]
    if stats.follow_ups.misses:
        parts += ["<h2>Misses</h2>", misses]
    elif counts.missed:
        parts.append(
            '<p class="note">OBSIDIAN_USAGE_LOG=full lists the questions and notes of the '
            "misses.</p>"
        )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
