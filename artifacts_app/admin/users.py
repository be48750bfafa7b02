"""Users, with their artifact tokens: create one (the secret shown once) and revoke."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse

from artifacts_app import access, services
from artifacts_app.admin.secrets import SECRETS_REFUSED, keys_table, show_secret_once
from artifacts_app.errors import ArtifactError

User = get_user_model()

if admin.site.is_registered(User):
    admin.site.unregister(User)


@admin.register(User)
class ArtifactsUserAdmin(UserAdmin):
    change_form_template = "admin/artifacts_app/user/change_form.html"
    readonly_fields = (*UserAdmin.readonly_fields, "artifact_tokens")

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None
    ):
        owner = self.get_object(request, object_id)
        extra_context = {
            **(extra_context or {}),
            "may_mint": access.may_mint_secret(request.user, owner=owner),
        }
        return super().change_view(request, object_id, form_url, extra_context)

    def get_fieldsets(self, request: HttpRequest, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None:
            return fieldsets
        return (*fieldsets, ("Artifact API tokens", {"fields": ("artifact_tokens",)}))

    @admin.display(description="tokens")
    def artifact_tokens(self, obj) -> str:
        return keys_table(
            list(obj.artifact_tokens.order_by("-created_at")[:50]),
            lambda key: reverse("admin:artifacts_app_apikey_revoke", args=[key.pk]),
        )

    def get_urls(self):
        return [
            path(
                "<int:user_id>/tokens/new/",
                self.admin_site.admin_view(self.create_token_view),
                name="auth_user_create_token",
            ),
            *super().get_urls(),
        ]

    def create_token_view(self, request: HttpRequest, user_id: int) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        user = get_object_or_404(User, pk=user_id)
        if not access.is_staff(request.user):
            return HttpResponseRedirect(reverse("admin:index"))
        back = reverse("admin:auth_user_change", args=[user.pk])
        if not access.may_mint_secret(request.user, owner=user):
            messages.error(request, SECRETS_REFUSED)
            return HttpResponseRedirect(back)
        label = (request.POST.get("label") or "").strip()
        try:
            key, secret = services.user_token_create(
                user=user, label=label or f"admin: {request.user.get_username()}"
            )
        except ArtifactError as exc:
            messages.error(request, exc.message)
            return HttpResponseRedirect(back)
        return show_secret_once(
            request, self.admin_site, key=key, secret=secret, owner=user.get_username(), back=back
        )
