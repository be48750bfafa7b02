"""prune_artifacts: batches, dry-run, exact counters, pruned events, bad arguments."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from artifacts_app import services
from artifacts_app.models import Agent, Artifact, Event
from tests.consumers.live import test_database_url as the_test_database_url

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, stdout: io.StringIO | None = None) -> str:
    out = stdout or io.StringIO()
    call_command("prune_artifacts", *args, stdout=out)
    return out.getvalue()


def backdate(agent: Agent, days: int, **filters) -> None:
    Artifact.objects.filter(agent=agent, **filters).update(
        updated_at=timezone.now() - timedelta(days=days)
    )


@pytest.fixture
def stocked(db):
    """Agent pr-stock: 12 old records (4 in session s-old), 8 recent ones."""
    agent = services.agent_create(slug="pr-stock", max_artifacts=1000)
    services.session_create(agent=agent, sid="s-old")
    for i in range(12):
        services.artifact_tag(
            agent=agent,
            kind="note",
            key=f"old-{i}",
            data={"i": i},
            session_id="s-old" if i < 4 else None,
        )
    backdate(agent, 40)
    for i in range(8):
        services.artifact_tag(agent=agent, kind="note", key=f"new-{i}", data={"i": i})
    return agent


def counts(agent: Agent) -> tuple[int, int, int]:
    agent.refresh_from_db()
    return (
        Artifact.objects.filter(agent=agent).count(),
        agent.artifact_count,
        Event.objects.filter(agent=agent).count(),
    )


def test_dry_run_changes_nothing_and_reports_what_a_real_run_removes(stocked):
    before = counts(stocked)
    out = run("--agent", "pr-stock", "--older-than", "30d", "--dry-run")
    assert "Would prune 12 artifact(s) (pr-stock: 12)" in out
    assert counts(stocked) == before
    out = run("--agent", "pr-stock", "--older-than", "30d", "--batch-size", "5")
    assert "Pruned 12 artifact(s) (pr-stock: 12)" in out
    remaining, counter, _ = counts(stocked)
    assert remaining == counter == 8
    assert not Artifact.objects.filter(key__startswith="old-").exists()


def test_pruned_events_only_for_records_with_a_session_and_seqs_stay_gapless(stocked):
    run("--agent", "pr-stock", "--older-than", "30d", "--batch-size", "3")
    pruned = Event.objects.filter(agent=stocked, payload__reason="pruned")
    assert pruned.count() == 4
    assert set(pruned.values_list("session_sid", flat=True)) == {"s-old"}
    seqs = list(Event.objects.filter(agent=stocked).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    stocked.refresh_from_db()
    assert stocked.last_seq == seqs[-1]


def test_keep_keeps_the_newest_of_the_selection(stocked):
    out = run("--agent", "pr-stock", "--keep", "5")
    assert "Pruned 15 artifact(s)" in out
    kept = set(Artifact.objects.filter(agent=stocked).values_list("key", flat=True))
    assert kept == {f"new-{i}" for i in range(3, 8)}
    assert counts(stocked)[1] == 5


def test_session_and_kind_narrow_the_selection(stocked):
    services.artifact_tag(agent=stocked, kind="report", key="r1", data={})
    backdate(stocked, 40, key="r1")
    assert "Pruned 4 artifact(s)" in run("--agent", "pr-stock", "--session", "s-old")
    assert "Pruned 1 artifact(s)" in run("--kind", "report", "--older-than", "1d")
    assert counts(stocked)[:2] == (16, 16)


def test_filters_together_with_keep_and_older_than(stocked):
    # The 12 old records are older than 30d; keep the newest 15 of all 20: 5 may go.
    assert "Pruned 5 artifact(s)" in run(
        "--agent", "pr-stock", "--older-than", "30d", "--keep", "15"
    )
    assert counts(stocked)[:2] == (15, 15)


def test_a_record_retagged_after_selection_is_not_pruned(stocked):
    old = Artifact.objects.filter(agent=stocked, key="old-5").values_list("updated_at", flat=True)[
        0
    ]
    services.artifact_tag(agent=stocked, kind="note", key="old-5", data={"again": True})
    removed = services.artifacts_delete(
        agent=stocked,
        ids=[services.keyed_id("pr-stock", "old-5")],
        reason="pruned",
        updated_at_most=old,
    )
    assert removed == 0
    assert Artifact.objects.filter(key="old-5").exists()


def test_stored_events_past_retention_are_pruned(stocked, settings):
    Event.objects.filter(agent=stocked, seq__lte=5).update(
        created_at=timezone.now() - timedelta(days=10)
    )
    Event.objects.filter(agent=stocked, seq__gt=5, seq__lte=8).update(
        created_at=timezone.now() - timedelta(days=3)
    )
    total = Event.objects.filter(agent=stocked).count()
    assert "and 5 stored event(s)" in run("--dry-run")
    assert Event.objects.filter(agent=stocked).count() == total
    assert "Pruned 0 artifact(s) and 5 stored event(s)" in run()
    assert "and 3 stored event(s)" in run("--events-older-than", "2d")
    settings.ARTIFACTS_EVENT_RETENTION = 3600
    assert "and 0 stored event(s)" in run()  # the rest is minutes old
    assert Event.objects.filter(agent=stocked).count() == total - 8
    assert counts(stocked)[:2] == (20, 20)  # no record filter: records untouched


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--older-than", "soon"), "--older-than takes a duration"),
        (("--older-than=-3d",), "--older-than takes a duration"),
        (("--events-older-than", "7"), "--events-older-than takes a duration"),
        (("--keep", "-1"), "--keep must be at least 0"),
        (("--keep", "many"), "--keep takes a whole number"),
        (("--batch-size", "0"), "--batch-size must be at least 1"),
        (("--agent", "nobody"), "There is no agent 'nobody'"),
        (("--agent", "pr-stock", "--session", "nope"), "There is no session 'nope'"),
        (("--kind", "no spaces"), "not a valid kind"),
    ],
)
def test_bad_arguments_refuse_with_a_sentence_and_change_nothing(stocked, args, fragment):
    before = counts(stocked)
    with pytest.raises(CommandError, match=fragment):
        run(*args)
    assert counts(stocked) == before


def test_bad_argument_exits_non_zero_without_a_traceback(db):
    # The test database (the scale profile's DATABASE_URL names one that is never created, and
    # the command's checks would refuse it before reading the argument).
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
        "DATABASE_URL": the_test_database_url(),
    }
    proc = subprocess.run(
        [sys.executable, "manage.py", "prune_artifacts", "--older-than", "forever"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "--older-than takes a duration" in proc.stderr
    assert "Traceback" not in proc.stderr


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_on_a_terminal_and_summary_at_the_end(stocked, monkeypatch):
    monkeypatch.setattr("time.monotonic", iter(range(0, 10_000)).__next__)
    out = run("--agent", "pr-stock", "--older-than", "30d", "--batch-size", "4", stdout=Tty())
    assert "\rpr-stock: 4 pruned" in out and "\rpr-stock: 12 pruned" in out
    assert out.rstrip().endswith("in 0.0s.") or "Pruned 12 artifact(s)" in out.splitlines()[-1]


def test_no_progress_line_when_not_a_terminal(stocked):
    out = run("--agent", "pr-stock", "--older-than", "30d", "--batch-size", "4")
    assert "\r" not in out


def test_parse_duration():
    assert services.parse_duration("30d", option="x") == timedelta(days=30)
    assert services.parse_duration("2w", option="x") == timedelta(weeks=2)
    assert services.parse_duration("90m", option="x") == timedelta(minutes=90)
