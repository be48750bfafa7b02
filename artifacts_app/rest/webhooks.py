"""The webhook routes under ``/<slug>/v1/webhooks`` (API.md "Webhooks").

Thin like the other views: the caller through ``access`` (the agent's key, or a user holding the
webhook model permission), one service of ``services.webhooks`` or one selector of
``selectors.webhooks``, orjson out. The secret appears in the answers of creation and rotation only.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request

from artifacts_app import access
from artifacts_app.event_schema import EVENT_TYPES
from artifacts_app.models import Webhook
from artifacts_app.names import KIND_PATTERN
from artifacts_app.rest.filters import PageFilter, cleaned
from artifacts_app.rest.pagination import next_url
from artifacts_app.rest.schema import JSON_BODY, PAGE, WEBHOOK, errors
from artifacts_app.rest.serializers import pattern, text
from artifacts_app.rest.views.base import AgentView, json_response, object_body
from artifacts_app.selectors import DEFAULT_LIMIT
from artifacts_app.selectors import webhooks as reads
from artifacts_app.services import webhooks as writes

CREATE_FIELDS = frozenset({"url", "events", "kinds", "description"})
UPDATE_FIELDS = CREATE_FIELDS | {"active"}
WEBHOOK_ID = OpenApiParameter(
    "webhook_id", str, OpenApiParameter.PATH, description="A webhook's id (`wh_…`)."
)

# --- shapes for the OpenAPI schema (the services hold every rule) -------------------------------


class _Filters(serializers.Serializer):
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=list(EVENT_TYPES)),
        required=False,
        allow_null=True,
        max_length=writes.FILTER_MAX,
        help_text="Event types delivered; left out, null or []: all.",
    )
    kinds = serializers.ListField(
        child=serializers.CharField(validators=pattern(KIND_PATTERN)),
        required=False,
        allow_null=True,
        max_length=writes.FILTER_MAX,
        help_text="Kinds delivered (the agent's); left out, null or []: all.",
    )
    description = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        validators=text(0, writes.DESCRIPTION_MAX),
    )


class WebhookCreateSerializer(_Filters):
    url = serializers.CharField(
        max_length=2048,
        help_text="https:// on a public address (no credentials, no fragment).",
    )


class WebhookUpdateSerializer(_Filters):
    url = serializers.CharField(required=False, max_length=2048)
    active = serializers.BooleanField(
        required=False, help_text="false stops delivery; true resumes where it stopped."
    )


class ReplaySerializer(serializers.Serializer):
    after = serializers.IntegerField(min_value=0, help_text="Deliver the stored events after it.")


class LastDeliverySerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    status = serializers.IntegerField(allow_null=True)
    at = serializers.DateTimeField()


class WebhookSerializer(serializers.Serializer):
    id = serializers.CharField()
    url = serializers.CharField()
    events = serializers.ListField(child=serializers.CharField())
    kinds = serializers.ListField(child=serializers.CharField())
    description = serializers.CharField(allow_blank=True)
    active = serializers.BooleanField()
    disabledReason = serializers.CharField(allow_null=True)
    lastDelivery = LastDeliverySerializer(allow_null=True)
    failingSince = serializers.DateTimeField(allow_null=True)
    pending = serializers.IntegerField(help_text="Selected events not yet delivered.")
    createdAt = serializers.DateTimeField()


class WebhookWithSecretSerializer(WebhookSerializer):
    secret = serializers.CharField(help_text="`whsec_…`: shown in this answer only.")


class WebhookListSerializer(serializers.Serializer):
    results = WebhookSerializer(many=True)
    next = serializers.URLField(allow_null=True)


class DeliverySerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    eventType = serializers.CharField()
    attempt = serializers.IntegerField()
    status = serializers.IntegerField(allow_null=True, help_text="null: no answer (`error`).")
    error = serializers.CharField(allow_null=True)
    durationMs = serializers.IntegerField()
    at = serializers.DateTimeField()


class DeliveryPageSerializer(serializers.Serializer):
    results = DeliverySerializer(many=True)
    next = serializers.URLField(allow_null=True)


def _shown(webhook: Webhook, secret: str | None = None) -> dict[str, Any]:
    body = reads.webhook_json(reads.webhook_values(webhook.agent_id, webhook.public_id))
    if secret is not None:
        body["secret"] = secret
    return body


class WebhooksView(AgentView):
    @extend_schema(
        operation_id="webhooks_list",
        summary="The agent's webhooks, with their delivery state",
        responses={200: WebhookListSerializer, **errors()},
    )
    def get(self, request: Request, slug: str) -> HttpResponse:
        agent = self.agent()
        access.require(self.caller(), agent, access.Action.WEBHOOK_READ)
        rows = [reads.webhook_json(row) for row in reads.webhooks_of(agent.pk)]
        return json_response({"results": rows, "next": None})

    @extend_schema(
        operation_id="webhooks_create",
        summary="Create a webhook; its signing secret is answered this once",
        request=WebhookCreateSerializer,
        responses={
            201: WebhookWithSecretSerializer,
            **errors(*JSON_BODY, *WEBHOOK, "too_many_webhooks"),
        },
    )
    def post(self, request: Request, slug: str) -> HttpResponse:
        agent = self.agent()
        access.require(self.caller(), agent, access.Action.WEBHOOK_CREATE)
        body = object_body(request.data, CREATE_FIELDS)
        webhook, secret = writes.webhook_create(
            agent=agent,
            url=body.get("url"),
            events=body.get("events"),
            kinds=body.get("kinds"),
            description=body.get("description"),
        )
        return json_response(_shown(webhook, secret), status=201)


class WebhookDetailView(AgentView):
    @extend_schema(
        operation_id="webhooks_get",
        summary="One webhook, with its delivery state",
        parameters=[WEBHOOK_ID],
        responses={200: WebhookSerializer, **errors("unknown_webhook")},
    )
    def get(self, request: Request, slug: str, webhook_id: str) -> HttpResponse:
        agent = self.agent()
        access.require(self.caller(), agent, access.Action.WEBHOOK_READ)
        return json_response(reads.webhook_json(reads.webhook_values(agent.pk, webhook_id)))

    @extend_schema(
        operation_id="webhooks_update",
        summary="Change a webhook's url, filters, description or `active`",
        parameters=[WEBHOOK_ID],
        request=WebhookUpdateSerializer,
        responses={200: WebhookSerializer, **errors(*JSON_BODY, *WEBHOOK, "unknown_webhook")},
    )
    def patch(self, request: Request, slug: str, webhook_id: str) -> HttpResponse:
        agent = self.agent()
        access.require(self.caller(), agent, access.Action.WEBHOOK_CHANGE)
        body = object_body(request.data, UPDATE_FIELDS)
        webhook = writes.webhook_update(agent=agent, webhook_id=webhook_id, changes=dict(body))
        return json_response(_shown(webhook))

    @extend_schema(
        operation_id="webhooks_delete",
        summary="Delete a webhook and its delivery log",
        parameters=[WEBHOOK_ID],
        responses={204: None, **errors("unknown_webhook")},
    )
    def delete(self, request: Request, slug: str, webhook_id: str) -> HttpResponse:
        agent = self.agent()
        access.require(self.caller(), agent, access.Action.WEBHOOK_DELETE)
        writes.webhook_delete(agent=agent, webhook_id=webhook_id)
        return HttpResponse(status=204)


class WebhookSecretView(AgentView):
    @extend_schema(
        operation_id="webhooks_rotate_secret",
        summary="A new signing secret, answered once; the old one stops signing at once",
        parameters=[WEBHOOK_ID],
        request=None,
        responses={200: WebhookWithSecretSerializer, **errors("unknown_webhook")},
    )
    def post(self, request: Request, slug: str, webhook_id: str) -> HttpResponse:
        agent = self.agent()
        access.require(self.caller(), agent, access.Action.WEBHOOK_CHANGE)
        webhook, secret = writes.webhook_secret_rotate(agent=agent, webhook_id=webhook_id)
        return json_response(_shown(webhook, secret))


class WebhookDeliveriesView(AgentView):
    @extend_schema(
        operation_id="webhooks_deliveries",
        summary="The webhook's delivery attempts, newest first",
        parameters=[WEBHOOK_ID],
        responses={200: DeliveryPageSerializer, **errors(*PAGE, "unknown_webhook")},
    )
    def get(self, request: Request, slug: str, webhook_id: str) -> HttpResponse:
        agent = self.agent()
        access.require(self.caller(), agent, access.Action.WEBHOOK_READ)
        row = reads.webhook_values(agent.pk, webhook_id)
        query = cleaned(PageFilter, request.query_params)
        page = reads.deliveries_page(
            row["id"], limit=int(query["limit"] or DEFAULT_LIMIT), cursor=query["cursor"]
        )
        return json_response({"results": page.rows, "next": next_url(request, page.next_cursor)})


class WebhookReplayView(AgentView):
    @extend_schema(
        operation_id="webhooks_replay",
        summary="Deliver again every stored event after `after` that the webhook selects",
        parameters=[WEBHOOK_ID],
        request=ReplaySerializer,
        responses={
            200: WebhookSerializer,
            **errors(*JSON_BODY, "invalid_after", "unknown_webhook"),
        },
    )
    def post(self, request: Request, slug: str, webhook_id: str) -> HttpResponse:
        agent = self.agent()
        access.require(self.caller(), agent, access.Action.WEBHOOK_CHANGE)
        body = object_body(request.data, frozenset({"after"}))
        webhook = writes.webhook_replay(agent=agent, webhook_id=webhook_id, after=body.get("after"))
        return json_response(_shown(webhook))
