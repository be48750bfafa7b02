from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from artifacts_app.management.commands._base import run_service
from artifacts_app.services import backup


class Command(BaseCommand):
    help = (
        "Restore a backup of `manage.py backup` into an empty database of the same kind and into "
        "the configured storage, then read every blob back and count the tables "
        '(docs/operations.md "Restore").'
    )
    # The database is empty until this has run: no system check may ask it for tables.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", type=Path, help="the backup's folder")
        parser.add_argument(
            "--no-verify",
            action="store_true",
            help="skip reading every blob back and counting the tables",
        )

    def handle(self, *args: Any, source: Path, no_verify: bool, **options: Any) -> None:
        report = run_service(lambda: backup.restore(source, verify=not no_verify))
        line = (
            f"Restored the {report.vendor} database and {report.blobs_copied} blob(s) "
            f"({report.blobs_present} already in the storage)"
        )
        if not no_verify:
            counts = ", ".join(f"{v} {k}" for k, v in report.counts.items())
            line += (
                f"; verified {report.blobs_verified} blob(s), {report.bytes} bytes, and {counts}"
            )
        self.stdout.write(line + ".")
