from __future__ import annotations

from django.apps import AppConfig


class ArtifactsAppConfig(AppConfig):
    name = "artifacts_app"
    verbose_name = "Agent artifacts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the modules registers their system checks; they need the app registry.
        from artifacts_app import checks, registry  # noqa: F401
