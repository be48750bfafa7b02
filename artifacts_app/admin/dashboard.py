"""An agent's dashboard in the admin: fill against ``max``, tags and evictions per hour over the
last 24 hours and 7 days (server-drawn SVG, nothing fetched from elsewhere), the kinds with their
counts, and the latest events, kept live by the agent's websocket stream (static/admin_ui).

Every figure comes from ``selectors.dashboard`` (bounded, indexed statements: see there).
"""

from __future__ import annotations

import datetime

from django.contrib.admin import ModelAdmin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from artifacts_app import access
from artifacts_app.admin.display import iso
from artifacts_app.jsontypes import JSONObject
from artifacts_app.models import Agent
from artifacts_app.registry import spec_for
from artifacts_app.selectors import dashboard

CHART_W, CHART_H, PAD_L, PAD_B, PAD_T = 760, 150, 40, 22, 10


def bar_chart(
    *, name: str, hours: list[datetime.datetime], counts: list[int], label: str, every: int
) -> SafeString:
    """Bars per hour, one ``<rect>`` each carrying its hour and count (``data-*`` and a ``<title>``
    shown on hover), the axis labelled every ``every`` hours."""
    top = max(max(counts, default=0), 1)
    inner_w, inner_h = CHART_W - PAD_L - 4, CHART_H - PAD_B - PAD_T
    step = inner_w / max(len(counts), 1)
    parts = [
        f'<svg class="chart" id="{escape(name)}" role="img" viewBox="0 0 {CHART_W} {CHART_H}" '
        f'width="{CHART_W}" height="{CHART_H}" aria-label="{escape(label)}" '
        f'data-total="{sum(counts)}" xmlns="http://www.w3.org/2000/svg">',
        f'<line class="axis" x1="{PAD_L}" y1="{PAD_T + inner_h}" x2="{CHART_W - 4}" '
        f'y2="{PAD_T + inner_h}"/>',
        f'<text class="tick" x="{PAD_L - 4}" y="{PAD_T + 8}" text-anchor="end">{top}</text>',
        f'<text class="tick" x="{PAD_L - 4}" y="{PAD_T + inner_h}" text-anchor="end">0</text>',
    ]
    for index, (hour, count) in enumerate(zip(hours, counts, strict=True)):
        x = PAD_L + index * step
        height = inner_h * count / top
        stamp = hour.strftime("%Y-%m-%dT%H:00Z")
        parts.append(
            f'<rect class="bar" x="{x + step * 0.1:.1f}" y="{PAD_T + inner_h - height:.1f}" '
            f'width="{max(step * 0.8, 1):.1f}" height="{height:.1f}" data-hour="{stamp}" '
            f'data-count="{count}"><title>{stamp}: {count} {escape(label)}</title></rect>'
        )
        if index % every == 0:
            text = hour.strftime("%m-%d") if every >= 24 else hour.strftime("%H:00")
            parts.append(f'<text class="tick" x="{x:.1f}" y="{CHART_H - 6}">{text}</text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 (numbers and escaped labels only)


def dashboard_view(
    model_admin: ModelAdmin[Agent], request: HttpRequest, agent_id: int
) -> HttpResponse:
    if not access.is_staff(request.user):
        return HttpResponseRedirect(reverse("admin:index"))
    agent = get_object_or_404(Agent, pk=agent_id)
    week = dashboard.agent_activity(agent.pk)
    day = week.last(24)
    cap = spec_for(agent).max
    events = dashboard.agent_latest_events(agent.pk)
    charts = [
        (
            f"{title} per hour, last {span}",
            bar_chart(
                name=f"{label}-{suffix}",
                hours=window.hours,
                counts=getattr(window, series),
                label=label,
                every=every,
            ),
            sum(getattr(window, series)),
        )
        for suffix, span, window, every in (("24h", "24 hours", day, 3), ("7d", "7 days", week, 24))
        for title, label, series in (
            ("Tags", "tags", "tagged"),
            ("Evictions", "evictions", "evicted"),
        )
    ]
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": f"{agent.slug}: dashboard",
        "agent": agent,
        "agent_url": reverse("admin:artifacts_app_agent_change", args=[agent.pk]),
        "artifacts_url": reverse("admin:artifacts_app_artifact_changelist")
        + f"?agent={agent.slug}",
        "count": agent.artifact_count,
        "cap": cap,
        "fill_percent": min(100, round(100 * agent.artifact_count / cap)) if cap else 0,
        "charts": charts,
        "kinds": dashboard.agent_kind_counts(agent.pk),
        "events": [_event_row(event) for event in events],
        "last_seq": events[0]["seq"] if events else 0,
        "stream_path": f"/{agent.slug}/v1/events",
        "now": iso(datetime.datetime.now(datetime.UTC)),
    }
    return TemplateResponse(request, "admin/artifacts_app/agent/dashboard.html", context)


def _event_row(event: JSONObject) -> JSONObject:
    record = event.get("record") or {}
    at = str(event.get("at") or "")
    return {
        "seq": event.get("seq"),
        "type": event.get("type"),
        "at": at[:19] + "Z" if len(at) >= 19 else at,
        "kind": record.get("kind", ""),
        "id": record.get("id", ""),
        "title": record.get("title") or record.get("key") or "",
        "session": event.get("sessionId") or "",
        "reason": event.get("reason") or "",
    }
