"""Admin touches for tables that are never counted: a date drill-down of bounded index seeks."""

from __future__ import annotations

import calendar
import datetime

from django import template
from django.db.models import Exists

register = template.Library()

YEARS_BACK = 20  # the drill-down offers years up to this far back from the newest record


def _holding(cl, ranges: list[tuple[datetime.datetime, datetime.datetime]]) -> list[bool]:
    """Which of ``ranges`` hold a row of the changelist: one statement of EXISTS probes, each an
    index seek on (agent, updated_at) (at most 31 of them, a month's days)."""
    if not ranges:
        return []
    field = cl.date_hierarchy
    base = cl.queryset.order_by()
    probes = {
        f"r{i}": Exists(base.filter(**{f"{field}__gte": lo, f"{field}__lt": hi}))
        for i, (lo, hi) in enumerate(ranges)
    }
    row = cl.model._default_manager.annotate(**probes).values(*probes).order_by()[:1]
    found = next(iter(row), None)
    return [bool(found and found[f"r{i}"]) for i in range(len(ranges))]


def _utc(year: int, month: int = 1, day: int = 1) -> datetime.datetime:
    return datetime.datetime(year, month, day, tzinfo=datetime.UTC)


def _next_month(year: int, month: int) -> datetime.datetime:
    return _utc(year + 1, 1) if month == 12 else _utc(year, month + 1)


@register.inclusion_tag("admin/date_hierarchy.html")
def uncounted_date_hierarchy(cl):
    """Django's drill-down asks the database for the distinct years, months and days of the whole
    filtered table; this one offers only the calendar's dates that hold records, each found by an
    index seek (an EXISTS per year, month or day, in one statement), and the filter a link sets
    is a range on the indexed ``updated_at``. No empty date is ever offered."""
    field = cl.date_hierarchy
    year_f, month_f, day_f = f"{field}__year", f"{field}__month", f"{field}__day"
    year, month, day = (cl.params.get(name) for name in (year_f, month_f, day_f))

    def link(filters):
        return cl.get_query_string(filters, [f"{field}__"])

    try:
        year, month, day = (int(v) if v else None for v in (year, month, day))
        if year and month and day:
            datetime.date(year, month, day)
        elif year and month:
            datetime.date(year, month, 1)
        elif year:
            datetime.date(year, 1, 1)
    except (TypeError, ValueError, OverflowError):
        return {"show": False}
    if year and month and day:
        return {
            "show": True,
            "back": {
                "link": link({year_f: year, month_f: month}),
                "title": f"{calendar.month_name[month]} {year}",
            },
            "choices": [{"title": datetime.date(year, month, day).isoformat()}],
        }
    if year and month:
        days = range(1, calendar.monthrange(year, month)[1] + 1)
        ranges = [
            (_utc(year, month, d), _utc(year, month, d) + datetime.timedelta(days=1)) for d in days
        ]
        return {
            "show": True,
            "back": {"link": link({year_f: year}), "title": str(year)},
            "choices": [
                {"link": link({year_f: year, month_f: month, day_f: d}), "title": str(d)}
                for d, held in zip(days, _holding(cl, ranges), strict=True)
                if held
            ],
        }
    if year:
        months = range(1, 13)
        ranges = [(_utc(year, m), _next_month(year, m)) for m in months]
        return {
            "show": True,
            "back": {"link": link({}), "title": "All dates"},
            "choices": [
                {"link": link({year_f: year, month_f: m}), "title": calendar.month_abbr[m]}
                for m, held in zip(months, _holding(cl, ranges), strict=True)
                if held
            ],
        }
    ordered = cl.queryset.order_by(field).values_list(field, flat=True)
    oldest = next(iter(ordered[:1]), None)
    newest = next(iter(cl.queryset.order_by(f"-{field}").values_list(field, flat=True)[:1]), None)
    if oldest is None or newest is None:
        return {"show": False}
    years = range(max(oldest.year, newest.year - YEARS_BACK + 1), newest.year + 1)
    ranges = [(_utc(y), _utc(y + 1)) for y in years]
    return {
        "show": True,
        "back": None,
        "choices": [
            {"link": link({year_f: y}), "title": str(y)}
            for y, held in zip(reversed(years), reversed(_holding(cl, ranges)), strict=True)
            if held
        ],
    }
