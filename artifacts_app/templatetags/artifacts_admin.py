"""Admin touches for tables that are never counted: a date drill-down that needs no query."""

from __future__ import annotations

import calendar
import datetime

from django import template
from django.utils import timezone

register = template.Library()

YEARS_BACK = 5


@register.inclusion_tag("admin/date_hierarchy.html")
def uncounted_date_hierarchy(cl):
    """Django's drill-down asks the database which years, months and days hold rows (a DISTINCT
    over the whole table); this one offers the calendar instead, and the filter it sets is a range
    on the indexed ``updated_at``."""
    field = cl.date_hierarchy
    year_f, month_f, day_f = f"{field}__year", f"{field}__month", f"{field}__day"
    year, month, day = (cl.params.get(name) for name in (year_f, month_f, day_f))

    def link(filters):
        return cl.get_query_string(filters, [f"{field}__"])

    try:
        year, month, day = (int(v) if v else None for v in (year, month, day))
    except (TypeError, ValueError):
        return {"show": False}
    if year and month and day:
        return {
            "show": True,
            "back": {
                "link": link({year_f: year, month_f: month}),
                "title": f"{calendar.month_name[month]} {year}",
            },
            "choices": [{"title": datetime.date(year, month, day).strftime("%B %-d, %Y")}],
        }
    if year and month:
        days = calendar.monthrange(year, month)[1]
        return {
            "show": True,
            "back": {"link": link({year_f: year}), "title": str(year)},
            "choices": [
                {"link": link({year_f: year, month_f: month, day_f: d}), "title": str(d)}
                for d in range(1, days + 1)
            ],
        }
    if year:
        return {
            "show": True,
            "back": {"link": link({}), "title": "All dates"},
            "choices": [
                {"link": link({year_f: year, month_f: m}), "title": calendar.month_abbr[m]}
                for m in range(1, 13)
            ],
        }
    this_year = timezone.localdate().year
    return {
        "show": True,
        "back": None,
        "choices": [
            {"link": link({year_f: y}), "title": str(y)}
            for y in range(this_year, this_year - YEARS_BACK, -1)
        ],
    }
