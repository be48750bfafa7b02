from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from artifacts_app.management.commands._base import run_service
from artifacts_app.services import backup


class Command(BaseCommand):
    help = (
        "Back up the database (one online snapshot) and then the blobs it points at into a new "
        'folder (docs/operations.md "Back up"). Safe while the server runs.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dest", type=Path, help="a new (or empty) folder")

    def handle(self, *args: Any, dest: Path, **options: Any) -> None:
        report = run_service(lambda: backup.backup(dest))
        counts = ", ".join(f"{v} {k}" for k, v in report.counts.items())
        self.stdout.write(
            f"Backed up the {report.vendor} database ({counts}) and {report.blobs} blob(s), "
            f"{report.bytes} bytes, into {report.path}."
        )
