from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from artifacts_app import playground

urlpatterns = [
    path("admin/", admin.site.urls),
    # --- ui: the playground and a login page for people who are not staff ---------------------
    path("playground/", playground.playground, name="playground"),
    path("playground/sessions", playground.new_session, name="playground-new-session"),
    path("playground/preview", playground.preview, name="playground-preview"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # --- REST API (issue 3): schema, offline docs, then every agent's /<slug>/v1/ routes ---
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("", include("artifacts_app.rest.urls")),
]
