from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from artifacts_app import health, monitoring, playground
from artifacts_app.admin.login import accounts_login, admin_login

# A dependency failure outside a view answers 503/507, a bug under /<slug>/ the 500 envelope.
handler500 = health.server_error

urlpatterns = [
    # The admin's login page, with failed logins counted per address (429 past the limit).
    path("admin/login/", admin_login),
    path("admin/", admin.site.urls),
    # For load balancers: 503 when requests cannot be served; each dependency's state for staff.
    path("healthz", health.healthz, name="healthz"),
    # Prometheus' scrape: staff or ARTIFACTS_METRICS_TOKEN only (docs/operations.md "Metrics").
    path("metrics", monitoring.metrics_view, name="metrics"),
    # --- ui: the playground and a login page for people who are not staff ---------------------
    path("playground/", playground.playground, name="playground"),
    path("playground/sessions", playground.new_session, name="playground-new-session"),
    path("playground/preview", playground.preview, name="playground-preview"),
    path("accounts/login/", accounts_login, name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # --- REST API: schema, offline docs, then every agent's /<slug>/v1/ routes ---
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("", include("artifacts_app.rest.urls")),
]
