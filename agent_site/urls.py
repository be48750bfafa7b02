from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from artifacts_app import health, playground

# A dependency failure outside a view answers 503/507, a bug under /<slug>/ the 500 envelope.
handler500 = health.server_error

urlpatterns = [
    path("admin/", admin.site.urls),
    # For load balancers: each dependency's state; 503 when requests cannot be served.
    path("healthz", health.healthz, name="healthz"),
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
