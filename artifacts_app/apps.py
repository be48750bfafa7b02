from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ArtifactsAppConfig(AppConfig):
    name = "artifacts_app"
    verbose_name = "Agent artifacts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from artifacts_app import checks, registry  # noqa: F401  (register the system checks)

        # API.md: agents declared in settings exist as soon as `migrate` has run.
        post_migrate.connect(registry.sync_declared_agents, sender=self)
