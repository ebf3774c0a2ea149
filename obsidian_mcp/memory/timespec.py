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


# -- the time a question speaks of ----------------------------------------------------------

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = (
    r"(january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
)
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:1[89]|2\d)\d\d)"
_COUNT_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
# The forms a date takes in a question, most precise first; the first found counts.
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s*{_YEAR}\b")
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+{_DAY},?\s*{_YEAR}\b")
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b")
_DAY_MONTH = re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\b")
_MONTH_DAY = re.compile(rf"\b{_MONTH}\s+{_DAY}\b(?!:)")
# A month without a year needs a word before it: "in May", not "may".
_SOME_MONTH = re.compile(rf"\b(in|during|since|last|early|late|mid|this)[\s-]+{_MONTH}\b")
_SOME_YEAR = re.compile(rf"\b(?:in|during|since|of|year)\s+{_YEAR}\b")
_AGO = re.compile(
    rf"\b(\d+|{'|'.join(_COUNT_WORDS)})\s+(day|week|month|year)s?\s+(?:ago|earlier|before)\b"
)
_LAST = re.compile(r"\b(yesterday|today|(?:last|this|past) (?:week|weekend|month|year))\b")


def _month_span(year: int, month: int) -> tuple[date, date]:
    following = date(year + month // 12, month % 12 + 1, 1)
    return date(year, month, 1), following


def _latest_month(month: int, anchor: date, *, before: bool) -> tuple[date, date]:
    """The span of the latest `month` up to the anchor's month (strictly before it when
    `before`: "last June" said in June is a year ago)."""
    later = month > anchor.month or (before and month == anchor.month)
    return _month_span(anchor.year - later, month)


def _relative_span(text: str, anchor: date) -> tuple[date, date] | None:
    ago = _AGO.search(text)
    if ago is not None:
        count = _COUNT_WORDS.get(ago[1]) or int(ago[1])
        days = count * _UNIT_DAYS[ago[2]]
        # About then: half a unit either side (a day is its own).
        spread = _UNIT_DAYS[ago[2]] // 2
        point = anchor - timedelta(days=days)
        return point - timedelta(days=spread), point + timedelta(days=spread + 1)
    last = _LAST.search(text)
    if last is None:
        return None
    phrase = last[1]
    if phrase in ("today", "yesterday"):
        day = anchor - timedelta(days=phrase == "yesterday")
        return day, day + timedelta(days=1)
    unit = phrase.split()[1]
    back = not phrase.startswith("this")
    if unit == "year":
        year = anchor.year - back
        return date(year, 1, 1), date(year + 1, 1, 1)
    if unit == "month":
        first = anchor.replace(day=1)
        start = (first - timedelta(days=1)).replace(day=1) if back else first
        return _month_span(start.year, start.month)
    monday = anchor - timedelta(days=anchor.weekday())
    if back:
        monday -= timedelta(days=7)
    if unit == "weekend":
        return monday + timedelta(days=5), monday + timedelta(days=7)
    return monday, monday + timedelta(days=7)


def _calendar_span(text: str, anchor: date) -> tuple[date, date] | None:
    try:
        for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy")):
            found = pattern.search(text)
            if found is not None:
                parts = dict(zip(order, found.groups(), strict=True))
                day = date(int(parts["y"]), _MONTHS[parts["m"]], int(parts["d"]))
                return day, day + timedelta(days=1)
        iso = _ISO_DAY.search(text)
        if iso is not None:
            day = date(int(iso[1]), int(iso[2]), int(iso[3]))
            return day, day + timedelta(days=1)
        month_year = _MONTH_YEAR.search(text)
        if month_year is not None:
            return _month_span(int(month_year[2]), _MONTHS[month_year[1]])
        for pattern, order in ((_DAY_MONTH, "dm"), (_MONTH_DAY, "md")):
            found = pattern.search(text)
            if found is not None:
                parts = dict(zip(order, found.groups(), strict=True))
                month, number = _MONTHS[parts["m"]], int(parts["d"])
                later = (month, number) > (anchor.month, anchor.day)
                day = date(anchor.year - later, month, number)
                return day, day + timedelta(days=1)
    except ValueError:  # "31 February"
        return None
    some_month = _SOME_MONTH.search(text)
    if some_month is not None:
        return _latest_month(_MONTHS[some_month[2]], anchor, before=some_month[1] == "last")
    some_year = _SOME_YEAR.search(text)
    if some_year is not None:
        year = int(some_year[1])
        return date(year, 1, 1), date(year + 1, 1, 1)
    return None


def mentioned_period(text: str, anchor: datetime) -> tuple[datetime, datetime] | None:
    """The time a question speaks of, as [start, end) on the local calendar, or None: a
    date ("on May 3, 2023", "3 May 2023", "2023-05-03"), a month ("in July 2023", "last
    June"), a year ("in 2022"), or a time before `anchor` ("two weeks ago", "last month",
    "yesterday"). A date without a year, or a month, is the latest up to the anchor."""
    value = " ".join(text.casefold().split())
    day = anchor.astimezone().date()
    span = _calendar_span(value, day) or _relative_span(value, day)
    if span is None:
        return None
    return _local_midnight(span[0]), _local_midnight(span[1])
