from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from artifacts_app import services
from artifacts_app.management.commands._base import run_service


class Command(BaseCommand):
    help = (
        "Remove stored blobs that no record points at and that are older than --grace. Safe while "
        "tags run: a blob claimed by a tag that has not committed yet is never removed "
        "(docs/operations.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--grace",
            default="1h",
            help="leave blobs younger than this (default 1h); must exceed the slowest upload",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would go; change nothing"
        )

    def handle(self, *args: Any, grace: str, dry_run: bool, **options: Any) -> None:
        span = run_service(lambda: services.parse_duration(grace, option="--grace"))
        report = run_service(lambda: services.blobs_collect(grace=span, dry_run=dry_run))
        temp = (
            f"{report.temp_removed} temporary file(s) of unfinished uploads, "
            f"{report.temp_bytes} bytes, and {report.uploads_removed} expired resumable upload(s)"
        )
        if dry_run:
            self.stdout.write(
                f"Would remove {report.removed} blob(s), {report.bytes} bytes "
                f"({report.adopted} of them in storage without a row), and {temp}. "
                "Nothing was changed (--dry-run)."
            )
        else:
            self.stdout.write(
                f"Removed {report.removed} blob(s), {report.bytes} bytes; kept {report.kept} that a "
                f"tag claimed meanwhile; adopted {report.adopted} stray file(s) from storage; "
                f"removed {temp}."
            )
