from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from artifacts_app import services
from artifacts_app.management.commands._base import run_service


class Command(BaseCommand):
    help = "Create a user token (acts as that Django user). The token is the last line printed, shown once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", help="an existing Django user")
        parser.add_argument(
            "--label", default="", help="a note to recognise the token by in the admin"
        )

    def handle(self, *args: object, username: str, label: str, **options: object) -> None:
        key, secret = run_service(lambda: services.user_token_create(user=username, label=label))
        self.stdout.write(
            f"User token {key.prefix}… for {username}. Store it now: it is not shown again."
        )
        self.stdout.write(secret)
