from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from artifacts_app import services
from artifacts_app.management.commands._base import run_service


class Command(BaseCommand):
    help = "Create an agent key (full rights over that agent). The key is the last line printed, shown once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the agent's slug")
        parser.add_argument(
            "--label", default="", help="a note to recognise the key by in the admin"
        )

    def handle(self, *args: object, slug: str, label: str, **options: object) -> None:
        key, secret = run_service(lambda: services.agent_key_create(agent=slug, label=label))
        self.stdout.write(
            f"Agent key {key.prefix}… for agent {slug}. Store it now: it is not shown again."
        )
        self.stdout.write(secret)
