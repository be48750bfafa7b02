from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from artifacts_app import services
from artifacts_app.management.commands._base import run_service


class Command(BaseCommand):
    help = "Revoke an agent key or user token; it gets 401 from then on."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "token", help="the whole secret, as create_agent_key or create_user_token printed it"
        )

    def handle(self, *args: object, token: str, **options: object) -> None:
        key = run_service(lambda: services.token_revoke(token=token))
        self.stdout.write(f"Revoked {key.get_kind_display()} {key.prefix}….")
