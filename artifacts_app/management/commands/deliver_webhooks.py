from __future__ import annotations

import signal
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from artifacts_app import webhooks


class Command(BaseCommand):
    help = (
        "Deliver webhooks until stopped (SIGTERM or Ctrl-C): any number of these, and the site's "
        "servers, share the work through the database; each webhook is worked by one at a time "
        '(docs/operations.md "Webhooks").'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--workers",
            type=int,
            default=None,
            help="sending threads (default ARTIFACTS_WEBHOOK_WORKERS)",
        )

    def handle(self, *args: Any, workers: int | None, **options: Any) -> None:
        count = workers or int(settings.ARTIFACTS_WEBHOOK_WORKERS)
        if count < 1:
            from django.core.management.base import CommandError

            raise CommandError("--workers must be at least 1.")
        done = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: done.set())
        runner = webhooks.Runner(count).start()
        self.stdout.write(
            f"delivering webhooks with {count} thread(s); stop with SIGTERM", ending="\n"
        )
        self.stdout.flush()
        try:
            while not done.wait(1.0):
                pass
        finally:
            runner.stop()
        self.stdout.write("stopped")
