"""Webhooks in the admin: their state and recent deliveries; replay, deactivate, reactivate.

Shown to staff holding ``view_webhook``; the actions need ``change_webhook`` (as the routes: the
access table's permissions) and go through ``services``. The secret is never shown."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from artifacts_app import access, services
from artifacts_app.admin.display import EMPTY, when
from artifacts_app.admin.fastlist import UncountedAdmin
from artifacts_app.errors import ArtifactError
from artifacts_app.models import Webhook, WebhookDelivery
from artifacts_app.selectors import webhooks as reads

RECENT = 20  # deliveries shown on a webhook's page
CHANGE = access.TABLE[access.Action.WEBHOOK_CHANGE].permission
VIEW = access.TABLE[access.Action.WEBHOOK_READ].permission


@admin.register(Webhook)
class WebhookAdmin(UncountedAdmin):
    list_display = ("public_id", "agent", "url", "state", "last_delivery", "failing")
    list_filter = ("active",)
    search_fields = ("public_id", "url", "agent__slug")
    list_select_related = ("agent",)
    ordering = ("-id",)
    actions = ("replay_stored", "deactivate", "reactivate")
    fields = (
        "public_id",
        "agent",
        "url",
        "events",
        "kinds",
        "description",
        "state",
        "cursor",
        "last_delivery",
        "failing",
        "pending",
        "recent_deliveries",
    )
    readonly_fields = fields

    def has_module_permission(self, request: HttpRequest) -> bool:
        return access.is_staff(request.user) and request.user.has_perm(VIEW)

    def has_view_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # webhooks are made over the API: the secret is answered to its maker

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # nobody edits a row in place; the actions go through the services

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_webhook_permission(self, request: HttpRequest) -> bool:
        return access.is_staff(request.user) and request.user.has_perm(CHANGE)

    @admin.display(description="state")
    def state(self, obj: Webhook) -> str:
        return "active" if obj.active else f"inactive: {obj.disabled_reason or 'deactivated'}"

    @admin.display(description="last delivery")
    def last_delivery(self, obj: Webhook) -> str:
        if obj.last_at is None:
            return EMPTY
        return f"seq {obj.last_seq} → {obj.last_status or 'no answer'} at {when(obj.last_at)}"

    @admin.display(description="failing since (UTC)")
    def failing(self, obj: Webhook) -> str:
        return when(obj.failing_since)

    @admin.display(description="pending events")
    def pending(self, obj: Webhook) -> int:
        return reads.selected_events(obj.agent_id, obj.events, obj.kinds, obj.cursor).count()

    @admin.display(description="recent deliveries (newest first)")
    def recent_deliveries(self, obj: Webhook) -> str:
        rows = WebhookDelivery.objects.filter(webhook=obj).order_by("-id")[:RECENT]
        if not rows:
            return EMPTY
        body = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} ms</td></tr>",
            (
                (when(d.at), d.seq, d.event_type, d.attempt, d.status or d.error, d.duration_ms)
                for d in rows
            ),
        )
        return format_html(
            "<table><tr><th>at</th><th>seq</th><th>event</th><th>try</th>"
            "<th>answer</th><th>took</th></tr>{}</table>",
            body,
        )

    def _each(self, request: HttpRequest, queryset: QuerySet[Webhook], call, done: str) -> None:
        for webhook in queryset.select_related("agent")[:1000]:
            try:
                call(webhook)
            except ArtifactError as exc:
                messages.error(request, f"{webhook.public_id}: {exc.message}")
            else:
                messages.success(request, f"{webhook.public_id}: {done}")

    @admin.action(description="Replay every stored event", permissions=["webhook"])
    def replay_stored(self, request: HttpRequest, queryset: QuerySet[Webhook]) -> None:
        self._each(
            request,
            queryset,
            lambda w: services.webhook_replay(agent=w.agent, webhook_id=w.public_id, after=0),
            "the stored events will be delivered again",
        )

    @admin.action(description="Deactivate", permissions=["webhook"])
    def deactivate(self, request: HttpRequest, queryset: QuerySet[Webhook]) -> None:
        who = request.user.get_username()
        self._each(
            request,
            queryset,
            lambda w: services.webhook_update(
                agent=w.agent,
                webhook_id=w.public_id,
                changes={"active": False},
                reason=f"deactivated in the admin by {who}",
            ),
            "deactivated",
        )

    @admin.action(description="Reactivate (resume where delivery stopped)", permissions=["webhook"])
    def reactivate(self, request: HttpRequest, queryset: QuerySet[Webhook]) -> None:
        self._each(
            request,
            queryset,
            lambda w: services.webhook_update(
                agent=w.agent, webhook_id=w.public_id, changes={"active": True}
            ),
            "reactivated",
        )
