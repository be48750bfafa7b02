from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from artifacts_app import health, monitoring, playground
from artifacts_app.admin import home as admin_home
from artifacts_app.admin.login import accounts_login, admin_login
from artifacts_app.rest.errors import NotFoundView
from artifacts_app.rest.views import ArtifactsAcrossView

# A dependency failure outside a view answers 503/507, a bug under /<slug>/ the 500 envelope.
handler500 = health.server_error

urlpatterns = [
    # A person arriving at the site: links to the admin, the playground and the API docs.
    path("", playground.landing, name="landing"),
    # The admin's login page, with failed logins counted per address (429 past the limit).
    path("admin/login/", admin_login),
    # The admin opens on what shipped (every agent's newest records); Django's own views follow.
    path("admin/", admin.site.admin_view(admin_home.home), name="admin-home"),
    path("admin/shipped/row", admin.site.admin_view(admin_home.row), name="admin-home-row"),
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
    # The list and its search across every agent the caller may see (API.md "Search").
    path("api/v1/artifacts", ArtifactsAcrossView.as_view(), name="artifacts-across"),
    re_path(r"^api/v1/[\s\S]*$", NotFoundView.as_view(), name="unknown_across_route"),
    path("", include("artifacts_app.rest.urls")),
]
