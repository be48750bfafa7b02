from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from artifacts_app import services
from artifacts_app.management.commands._base import run_service
from artifacts_app.registry import DEFAULT_MAX


class Command(BaseCommand):
    help = (
        "Create a freeform agent (no module): any kind name is accepted, capped at --max records."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the agent's slug: a-z 0-9 and -, at most 63 characters")
        parser.add_argument(
            "--max", type=int, default=DEFAULT_MAX, help=f"retention cap (default {DEFAULT_MAX})"
        )

    def handle(self, *args: object, slug: str, max: int, **options: object) -> None:
        agent = run_service(lambda: services.agent_create(slug=slug, max_artifacts=max))
        self.stdout.write(
            f"Created agent {agent.slug} (max {agent.max_artifacts}). Its routes live under /{agent.slug}/v1/."
        )
