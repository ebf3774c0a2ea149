"""Time windows for recall, and ages as a person says them.

Calendar words ("today", a bare date) mean the server's local calendar: the server runs
beside the user's Obsidian, so its clock is the user's. Stored times are UTC.
"""

import re
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

from obsidian_mcp.errors import InvalidArgument
from obsidian_mcp.limits import MAX_MOMENT_CHARS, excerpt

TimeRange = Literal["today", "week", "month", "all"]
TIME_RANGES: tuple[TimeRange, ...] = ("today", "week", "month", "all")

_RELATIVE = re.compile(r"^(\d+)\s*(m|min|h|d|w)$")
_UNIT_SECONDS = {"m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# One grammar for every date parameter (recall's since and until, remember's occurred).
_MOMENT_HELP = (
    "Give a date ('2026-05-01'), a date and time ('2026-05-01T14:30', optionally with 'Z' "
    "or an offset), a day as said today ('today', 'yesterday', '3 days ago', 'last week') "
    "or an age ('30m', '12h', '3d', '2w')."
)
_SPOKEN_AGO = re.compile(r"^(\d+|a|an|one)\s+(day|week|month|year)s?\s+ago$")
_SPOKEN_LAST = {"last week": 7, "last month": 30, "last year": 365}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}


def _local_midnight(day: date) -> datetime:
    return datetime.combine(day, time()).astimezone()


def spoken_days_ago(text: str) -> int | None:
    """How many days back a day said in words is ('today' 0, 'yesterday' 1, '3 days ago',
    'last week'); None when the text is not one."""
    value = " ".join(text.lower().split())
    if value == "today":
        return 0
    if value == "yesterday":
        return 1
    if value in _SPOKEN_LAST:
        return _SPOKEN_LAST[value]
    spoken = _SPOKEN_AGO.match(value)
    if spoken is None:
        return None
    count = 1 if spoken[1] in ("a", "an", "one") else int(spoken[1])
    return count * _UNIT_DAYS[spoken[2]]


def parse_moment(text: str, *, now: datetime, name: str, end_of_day: bool) -> datetime:
    """A date parameter's value as an aware datetime; a day (a bare date, 'yesterday') as
    an end (`end_of_day`) includes that day."""
    value = text.strip()
    if len(value) > MAX_MOMENT_CHARS:
        raise InvalidArgument(f"{name}={excerpt(text)} is not a date or time. {_MOMENT_HELP}")
    if value.lower() == "now":
        return now
    days = spoken_days_ago(value)
    if days is not None:
        day = now.astimezone().date() - timedelta(days=days)
        return _local_midnight(day + timedelta(days=1) if end_of_day else day)
    relative = _RELATIVE.match(value.lower())
    try:
        day = date.fromisoformat(value) if not relative and len(value) == 10 else None
        moment = datetime.fromisoformat(value) if not relative and day is None else None
    except ValueError:
        raise InvalidArgument(
            f"{name}={excerpt(text)} is not a date or time. {_MOMENT_HELP}"
        ) from None
    try:
        if relative:
            return now - timedelta(seconds=int(relative[1]) * _UNIT_SECONDS[relative[2]])
        if day is not None:
            return _local_midnight(day + timedelta(days=1) if end_of_day else day)
        assert moment is not None
        return moment if moment.tzinfo is not None else moment.astimezone()
    except (OverflowError, ValueError):
        # An age older than the calendar, or a date at its very edge (year 1 or 9999,
        # which local time or the end of the day pushes past the edge).
        raise InvalidArgument(
            f"{name}={excerpt(text)} is outside the calendar this server can count in; give a "
            "date between the years 2 and 9998, or an age such as '3d'."
        ) from None


def window(
    time_range: str, since: str | None, until: str | None, now: datetime
) -> tuple[datetime | None, datetime | None]:
    """The [start, end) a recall covers; None leaves that side open."""
    if time_range == "today":
        start: datetime | None = _local_midnight(now.astimezone().date())
    elif time_range == "week":
        start = now - timedelta(days=7)
    elif time_range == "month":
        start = now - timedelta(days=30)
    elif time_range == "all":
        start = None
    else:
        raise InvalidArgument(
            f"time_range={excerpt(time_range)} is not one of {', '.join(TIME_RANGES)}; for another "
            "span pass since (and until), e.g. since='3d'."
        )
    if since:
        since_at = parse_moment(since, now=now, name="since", end_of_day=False)
        start = since_at if start is None else max(start, since_at)
    end = parse_moment(until, now=now, name="until", end_of_day=True) if until else None
    if start is not None and end is not None and start >= end:
        raise InvalidArgument(
            f"The window is empty: it starts {start.isoformat(timespec='minutes')} and ends "
            f"{end.isoformat(timespec='minutes')}. Swap or widen since/until."
        )
    return start, end


def describe_window(time_range: str, since: str | None, until: str | None) -> list[str]:
    """The window in words, for the recall summary."""
    words = {
        "today": "from today",
        "week": "from the last 7 days",
        "month": "from the last 30 days",
    }
    parts = [words[time_range]] if time_range in words else []
    if since:
        parts.append(f"since {since}")
    if until:
        parts.append(f"until {until}")
    return parts


def age(ts: datetime, now: datetime) -> str:
    seconds = (now - ts).total_seconds()
    for unit, size in (
        ("year", 365 * 86400),
        ("month", 30 * 86400),
        ("week", 7 * 86400),
        ("day", 86400),
        ("hour", 3600),
        ("minute", 60),
    ):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''} ago"
    return "just now"


# -- when a memory happened ------------------------------------------------------------------


def resolve_occurred(text: str, now: datetime) -> str:
    """When a memory happened, resolved against `now` (so 'yesterday' stays the day it
    meant) and stored as an ISO date, or as a UTC date and time when a time was given."""
    value = " ".join(text.strip().lower().split())
    if len(value) > MAX_MOMENT_CHARS:
        raise InvalidArgument(f"occurred={excerpt(text)} is not a date. {_MOMENT_HELP}")
    days = 0 if value == "now" else spoken_days_ago(value)
    try:
        if days is not None:
            return (now.astimezone().date() - timedelta(days=days)).isoformat()
        if len(value) == 10:
            day = date.fromisoformat(value)
            moment = _local_midnight(day)
        else:
            day = None
            moment = parse_moment(text, now=now, name="occurred", end_of_day=False)
    except (InvalidArgument, OverflowError, ValueError):
        raise InvalidArgument(f"occurred={excerpt(text)} is not a date. {_MOMENT_HELP}") from None
    if moment > now + timedelta(days=1):
        raise InvalidArgument(
            f"occurred={excerpt(text)} is in the future; give when it happened. "
            "(Plans belong in the content: 'plans to visit on 2026-12-01'.)"
        )
    if day is not None:
        return day.isoformat()
    if _RELATIVE.match(value) and value[-1] in "dw":
        return moment.astimezone().date().isoformat()  # '3d' is a day, not a time of day
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def occurred_moment(occurred: str) -> datetime | None:
    """The moment a stored `occurred` stands for (a date: its local midnight), or None
    when the stored text is not one (a line written by hand)."""
    try:
        if len(occurred) == 10:
            return _local_midnight(date.fromisoformat(occurred))
        moment = datetime.fromisoformat(occurred)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.astimezone()
