from __future__ import annotations

import sys
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from artifacts_app import services
from artifacts_app.management.commands._base import run_service
from artifacts_app.services import pruning


class Command(BaseCommand):
    help = (
        "Delete artifacts in batches: those the filters select (all filters must match), oldest "
        "first, with artifact.deleted (reason pruned) for records that had a session. Stored events "
        "older than ARTIFACTS_EVENT_RETENTION (or --events-older-than) are pruned too."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agent", help="only this agent's records (a slug)")
        parser.add_argument("--kind", help="only records of this kind")
        parser.add_argument("--session", help="only records of this session id")
        parser.add_argument(
            "--older-than", help="only records last updated longer ago than this (30d, 12h, 15m)"
        )
        parser.add_argument(
            "--keep", help="keep the newest N records of the selection in each agent"
        )
        parser.add_argument(
            "--events-older-than",
            help="prune stored events older than this (default: ARTIFACTS_EVENT_RETENTION)",
        )
        parser.add_argument("--batch-size", default=str(pruning.BATCH_SIZE), help="rows per batch")
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would go; change nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        keep = _whole(options["keep"], "--keep", minimum=0)
        batch_size = _whole(options["batch_size"], "--batch-size", minimum=1)
        assert batch_size is not None  # the option has a default
        older = options["older_than"]
        events_older = options["events_older_than"]
        older_than = (
            run_service(lambda: services.parse_duration(older, option="--older-than"))
            if older is not None
            else None
        )
        events_older_than = (
            run_service(lambda: services.parse_duration(events_older, option="--events-older-than"))
            if events_older is not None
            else None
        )
        out = self.stdout
        tty = out.isatty() if hasattr(out, "isatty") else sys.stdout.isatty()
        dry_run = options["dry_run"]
        verb = "would prune" if dry_run else "pruned"
        started = time.monotonic()
        last_draw = [0.0]

        def progress(slug: str, done: int) -> None:
            now = time.monotonic()
            if tty and now - last_draw[0] >= 0.2:
                last_draw[0] = now
                rate = done / max(now - started, 1e-6)
                out.write(f"\r{slug}: {done} {verb} ({rate:,.0f}/s)…", ending="")
                out.flush()

        report = run_service(
            lambda: services.artifacts_prune(
                agent=options["agent"],
                kind=options["kind"],
                session=options["session"],
                older_than=older_than,
                keep=keep,
                events_older_than=events_older_than,
                dry_run=dry_run,
                batch_size=batch_size,
                progress=progress,
            )
        )
        if tty and last_draw[0]:
            out.write("\r\033[K", ending="")
        head = "Would prune" if dry_run else "Pruned"
        per_agent = ", ".join(f"{slug}: {n}" for slug, n in sorted(report.per_agent.items()))
        out.write(
            f"{head} {report.artifacts} artifact(s)"
            + (f" ({per_agent})" if per_agent else "")
            + f" and {report.events} stored event(s)"
            + f" in {time.monotonic() - started:.1f}s."
            + (" Nothing was changed (--dry-run)." if dry_run else "")
        )


def _whole(raw: str | None, option: str, *, minimum: int) -> int | None:
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise CommandError(f"{option} takes a whole number; got {raw!r}.") from None
    if value < minimum:
        raise CommandError(f"{option} must be at least {minimum}; got {value}.")
    return value
