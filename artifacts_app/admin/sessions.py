"""Sessions: owner, the session's newest artifacts (read-only, through the selector), a playground link."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from artifacts_app import selectors
from artifacts_app.admin.fastlist import SupervisorMixin, UncountedAdmin
from artifacts_app.models import Session

INLINE_ROWS = 50


def playground_url(session: Session) -> str:
    return "/playground/?" + urlencode({"agent": session.agent.slug, "session": session.sid})


@admin.register(Session)
class SessionAdmin(SupervisorMixin, UncountedAdmin):
    list_display = ("sid", "agent", "owner", "created_at", "playground")
    list_filter = ("agent",)
    search_fields = ("=sid", "owner__username")
    list_select_related = ("agent", "owner")
    ordering = ("-created_at", "-id")
    sortable_by = ()
    fields = ("sid", "agent", "owner", "created_at", "playground", "artifacts")
    readonly_fields = fields

    @admin.display(description="playground")
    def playground(self, obj: Session) -> str:
        return format_html('<a href="{}">open in the playground</a>', playground_url(obj))

    @admin.display(description=f"artifacts (newest {INLINE_ROWS})")
    def artifacts(self, obj: Session) -> str:
        page = selectors.artifacts_page(agent=obj.agent, session_id=obj.sid, limit=INLINE_ROWS)
        if not page.rows:
            return "No artifacts in this session."
        rows = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>',
            (
                (
                    reverse("admin:artifacts_app_artifact_change", args=[quote(record.id)]),
                    Truncator(record.title or record.key or record.id).chars(80),
                    record.kind,
                    record.source,
                    record.turn_id or "—",
                    record.updated_at.strftime("%Y-%m-%d %H:%M:%S"),
                )
                for record in page.records()
            ),
        )
        return format_html(
            '<table class="session-artifacts"><thead><tr><th>title</th><th>kind</th><th>source</th>'
            "<th>turn</th><th>updated</th></tr></thead><tbody>{}</tbody></table>",
            rows,
        )
