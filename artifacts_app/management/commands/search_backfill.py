from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from artifacts_app import services
from artifacts_app.management.commands._base import run_service


class Command(BaseCommand):
    help = (
        "Index for search (q) the records stored before search existed, a batch at a time, each "
        "in its own short transaction: safe while tags run, and safe to stop and run again "
        "(it picks up the records still without words). docs/operations.md."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch", type=int, default=500, help="records per transaction (default 500)"
        )

    def handle(self, *args: Any, batch: int, **options: Any) -> None:
        if batch < 1:
            raise CommandError("--batch is a whole number of at least 1.")

        def progress(done: int, last: str) -> None:
            self.stdout.write(f"{done} record(s) indexed, up to {last}")

        done = run_service(lambda: services.search_backfill(batch=batch, on_batch=progress))
        self.stdout.write(f"Indexed {done} record(s); every record now has its words.")
