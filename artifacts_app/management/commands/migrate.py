"""``migrate``, then the explicit step that makes the agents declared in settings exist (API.md:
they exist as soon as ``migrate`` has run). An explicit step rather than a ``post_migrate``
receiver: no signal in the domain flow, and the one way to create agents is called by name."""

from __future__ import annotations

from typing import Any

from django.core.management.commands import migrate

from artifacts_app import services


class Command(migrate.Command):
    help = migrate.Command.help + " Then makes the rows of the agents declared in ARTIFACTS_AGENTS."

    def handle(self, *args: Any, **options: Any) -> None:
        super().handle(*args, **options)
        if options.get("plan") or options.get("check_unapplied") or options.get("prune"):
            return  # reporting modes change nothing
        if options.get("migration_name"):
            return  # migrated to a named migration: the tables may be behind the models
        synced = services.agents_sync_declared()
        if options["verbosity"] >= 1 and synced:
            self.stdout.write(f"Declared agents in step: {', '.join(a.slug for a in synced)}")
