"""Agents, their kinds (from the registry, read-only) and their keys; keys and tokens listed."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from artifacts_app import access, services
from artifacts_app.admin.dashboard import dashboard_view
from artifacts_app.admin.display import EMPTY, when
from artifacts_app.admin.fastlist import SupervisorMixin, UncountedAdmin
from artifacts_app.admin.secrets import (
    SECRETS_REFUSED,
    keys_table,
    revoked_message,
    show_secret_once,
)
from artifacts_app.errors import ArtifactError
from artifacts_app.models import Agent, ApiKey
from artifacts_app.registry import slug_problem, spec_for


class AgentAddForm(forms.ModelForm):
    class Meta:
        model = Agent
        fields = ("slug", "max_artifacts")

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"]
        problem = slug_problem(slug)
        if problem:
            raise forms.ValidationError(problem)
        return slug


def _is_staff(request: HttpRequest) -> bool:
    return access.is_staff(request.user)


@admin.register(Agent)
class AgentAdmin(SupervisorMixin, admin.ModelAdmin):
    list_display = ("slug", "fill", "kind_names", "tool_on", "active_keys", "created", "dashboard")
    search_fields = ("=slug",)
    change_form_template = "admin/artifacts_app/agent/change_form.html"
    fields = (
        "slug",
        "module_or_freeform",
        "fill",
        "tool_on",
        "kinds_and_schemas",
        "keys",
        "created",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request)

    def get_form(
        self, request: HttpRequest, obj: Agent | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm[Agent]]:
        if obj is None:
            kwargs["form"] = AgentAddForm
            kwargs["fields"] = ("slug", "max_artifacts")
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Agent | None = None):
        return ("slug", "max_artifacts") if obj is None else self.fields

    def get_readonly_fields(self, request: HttpRequest, obj: Agent | None = None):
        return () if obj is None else self.readonly_fields

    def add_view(
        self,
        request: HttpRequest,
        form_url: str = "",
        extra_context: dict[str, object] | None = None,
    ):
        # The service has the last word (save_model): a refusal it raises is a message on the
        # add page, never a 500.
        try:
            return super().add_view(request, form_url, extra_context)
        except ArtifactError as exc:
            messages.error(request, exc.message)
            return HttpResponseRedirect(request.get_full_path())

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, object] | None = None,
    ):
        extra_context = {**(extra_context or {}), "may_mint": access.may_mint_secret(request.user)}
        return super().change_view(request, object_id, form_url, extra_context)

    def save_model(
        self, request: HttpRequest, obj: Agent, form: forms.ModelForm[Agent], change: bool
    ) -> None:
        # A freeform agent, made by the service (the form only validated the input).
        created = services.agent_create(slug=obj.slug, max_artifacts=obj.max_artifacts)
        obj.pk = created.pk
        obj.created_at = created.created_at

    # --- columns and fields ----------------------------------------------------------------

    @admin.display(description="artifacts / max")
    def fill(self, obj: Agent) -> str:
        return f"{obj.artifact_count:,} / {obj.max_artifacts:,}"

    @admin.display(description="kinds")
    def kind_names(self, obj: Agent) -> str:
        try:
            kinds = spec_for(obj).kinds
        except Exception:  # a declaration that no longer imports must not break the list
            return "?"
        return ", ".join(kinds) or "freeform"

    @admin.display(description="tool", boolean=True)
    def tool_on(self, obj: Agent) -> bool:
        try:
            return spec_for(obj).tool_enabled
        except Exception:
            return False

    @admin.display(description="active keys")
    def active_keys(self, obj: Agent) -> int:
        return obj.keys.filter(revoked_at__isnull=True).count()

    @admin.display(description="created (UTC)")
    def created(self, obj: Agent) -> str:
        return when(obj.created_at)

    @admin.display(description="dashboard")
    def dashboard(self, obj: Agent) -> str:
        url = reverse("admin:artifacts_app_agent_dashboard", args=[obj.pk])
        return format_html('<a href="{}">dashboard</a>', url)

    @admin.display(description="declared in")
    def module_or_freeform(self, obj: Agent) -> str:
        spec = spec_for(obj)
        if spec.module:
            return spec.module
        keep = f"keeps {spec.keep_versions} versions per record"
        if spec.declaration:
            return f"over HTTP (PUT /{obj.slug}/v1/artifacts/kinds); {keep}"
        return f"— (freeform: any kind, no tool); {keep}"

    @admin.display(description="kinds and their JSON Schemas")
    def kinds_and_schemas(self, obj: Agent) -> str:
        kinds = spec_for(obj).kinds
        if not kinds:
            return "Freeform: any non-empty kind; an omitted kind is “artifact”."
        return format_html_join(
            "",
            '<div class="kind"><strong>{}</strong> — {}{}<pre class="artifact-json">{}</pre></div>',
            (
                (
                    name,
                    kind.description,
                    f" (keeps {kind.keep_versions} versions)" if kind.keep_versions else "",
                    json.dumps(kind.json_schema(), indent=2)
                    if kind.schema is not None
                    else "no schema: any JSON",
                )
                for name, kind in kinds.items()
            ),
        )

    @admin.display(description="keys")
    def keys(self, obj: Agent) -> str:
        return keys_table(
            list(obj.keys.order_by("-created_at")[:50]),
            lambda key: reverse("admin:artifacts_app_apikey_revoke", args=[key.pk]),
        )

    # --- create a key ----------------------------------------------------------------------

    def get_urls(self):
        urls = super().get_urls()
        return [
            path(
                "<int:agent_id>/keys/new/",
                self.admin_site.admin_view(self.create_key_view),
                name="artifacts_app_agent_create_key",
            ),
            path(
                "<int:agent_id>/dashboard/",
                self.admin_site.admin_view(
                    lambda request, agent_id: dashboard_view(self, request, agent_id)
                ),
                name="artifacts_app_agent_dashboard",
            ),
            *urls,
        ]

    def create_key_view(self, request: HttpRequest, agent_id: int) -> HttpResponse:
        if not _is_staff(request):
            return HttpResponseRedirect(reverse("admin:index"))
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        agent = get_object_or_404(Agent, pk=agent_id)
        back = reverse("admin:artifacts_app_agent_change", args=[agent.pk])
        if not access.may_mint_secret(request.user):
            messages.error(request, SECRETS_REFUSED)
            return HttpResponseRedirect(back)
        label = (request.POST.get("label") or "").strip()
        try:
            key, secret = services.agent_key_create(
                agent=agent, label=label or f"admin: {request.user.get_username()}"
            )
        except ArtifactError as exc:
            messages.error(request, exc.message)
            return HttpResponseRedirect(back)
        return show_secret_once(
            request, self.admin_site, key=key, secret=secret, owner=agent.slug, back=back
        )


class ActiveFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "active"), ("revoked", "revoked")]

    def queryset(self, request, queryset):
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(SupervisorMixin, UncountedAdmin):
    list_display = ("shown_prefix", "kind", "owner", "label", "created", "revoked")
    list_filter = ("kind", ActiveFilter)
    search_fields = ("prefix", "label", "agent__slug", "user__username")
    list_select_related = ("agent", "user")
    ordering = ("-created_at", "-id")
    actions = ("revoke_selected",)
    fields = ("shown_prefix", "kind", "owner", "label", "created", "revoked")
    readonly_fields = fields

    @admin.display(description="created (UTC)")
    def created(self, obj: ApiKey) -> str:
        return when(obj.created_at)

    @admin.display(description="revoked (UTC)")
    def revoked(self, obj: ApiKey) -> str:
        return when(obj.revoked_at)

    @admin.display(description="prefix")
    def shown_prefix(self, obj: ApiKey) -> str:
        return f"{obj.prefix}…"

    @admin.display(description="owner")
    def owner(self, obj: ApiKey) -> str:
        if obj.agent is not None:
            return obj.agent.slug
        return obj.user.get_username() if obj.user is not None else EMPTY

    def get_actions(self, request: HttpRequest):
        actions = super().get_actions(request)
        if not access.may_revoke_secret(request.user):
            actions.pop("revoke_selected", None)
        return actions

    @admin.action(description="Revoke selected keys and tokens")
    def revoke_selected(self, request: HttpRequest, queryset) -> None:
        for key in queryset.filter(revoked_at__isnull=True).select_related("user")[:1000]:
            if not access.may_revoke_secret(request.user, key):
                messages.error(request, f"{key.prefix}…: {SECRETS_REFUSED}")
                continue
            try:
                revoked_message(request, services.api_key_revoke(key_id=key.pk))
            except ArtifactError as exc:
                messages.error(request, exc.message)

    def get_urls(self):
        return [
            path(
                "<int:key_id>/revoke/",
                self.admin_site.admin_view(self.revoke_view),
                name="artifacts_app_apikey_revoke",
            ),
            *super().get_urls(),
        ]

    def revoke_view(self, request: HttpRequest, key_id: int) -> HttpResponse:
        if not _is_staff(request):
            return HttpResponseRedirect(reverse("admin:index"))
        key = get_object_or_404(ApiKey.objects.select_related("agent", "user"), pk=key_id)
        back = (
            reverse("admin:artifacts_app_agent_change", args=[key.agent_id])
            if key.agent_id
            else reverse("admin:auth_user_change", args=[key.user_id])
        )
        if not access.may_revoke_secret(request.user, key):
            messages.error(request, SECRETS_REFUSED)
            return HttpResponseRedirect(back)
        if request.method == "POST":
            try:
                revoked_message(request, services.api_key_revoke(key_id=key.pk))
            except ArtifactError as exc:
                messages.error(request, exc.message)
            return HttpResponseRedirect(back)
        return TemplateResponse(
            request,
            "admin/artifacts_app/revoke_confirm.html",
            {
                **self.admin_site.each_context(request),
                "title": f"Revoke {key.get_kind_display()} {key.prefix}…?",
                "key": key,
                "owner": self.owner(key),
                "back": back,
            },
        )
