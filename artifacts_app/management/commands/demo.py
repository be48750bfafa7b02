from __future__ import annotations

import functools
import secrets

from django.core.management.base import BaseCommand, CommandParser

from artifacts_app import selectors, services
from artifacts_app.management.commands._base import run_service
from artifacts_app.models import Agent

DEMO_AGENT = "reviewer"
DEMO_SESSION = "s_demo"
DEMO_LABEL = "demo"

REPORT = """# Weekly review report

Three pull requests reviewed this week:

| PR | verdict |
|----|---------|
| o/r#7 | approve |
| o/r#8 | comment |
| o/r#9 | request changes |
"""


class Command(BaseCommand):
    help = (
        "Load demo data: agent `reviewer`, a staff user `admin`, a user `alice` who owns session "
        "s_demo, a few artifacts with content, and a fresh agent key (printed once). Safe to re-run."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--host", default="127.0.0.1:8000", help="host:port the server will listen on"
        )

    def handle(self, *args: object, host: str, **options: object) -> None:
        passwords = {"admin": secrets.token_urlsafe(9), "alice": secrets.token_urlsafe(9)}
        services.user_set(
            username="admin", password=passwords["admin"], email="admin@example.com", staff=True
        )
        alice = services.user_set(
            username="alice", password=passwords["alice"], email="alice@example.com"
        )
        agent: Agent = run_service(lambda: selectors.agent_get(DEMO_AGENT))
        if selectors.session_pk(agent.pk, DEMO_SESSION) is None:
            run_service(lambda: services.session_create(agent=agent, sid=DEMO_SESSION, owner=alice))
        for number, verdict in ((7, "approve"), (8, "comment"), (9, "request-changes")):
            run_service(functools.partial(_tag_review, agent, number, verdict))
        run_service(
            lambda: services.artifact_tag(
                agent=agent,
                kind="report",
                key="weekly-report",
                title="Weekly review report",
                data={"week": "2026-W48", "reviewed": 3},
                session_id=DEMO_SESSION,
                turn_id="t-4",
                source="model",
                contents=REPORT,
            )
        )
        # One live demo key at a time: earlier demo keys are revoked, so the printed one is the key.
        services.agent_keys_revoke(agent=agent, label=DEMO_LABEL)
        _, secret = services.agent_key_create(agent=agent, label=DEMO_LABEL)

        base = f"http://{host}"
        self.stdout.write(
            "\n".join(
                [
                    "",
                    "Demo data is loaded.",
                    f"  Admin:       {base}/admin/   log in as  admin / {passwords['admin']}",
                    f"  Playground:  {base}/playground/   (alice / {passwords['alice']} owns session {DEMO_SESSION})",
                    f"  API:         {base}/{DEMO_AGENT}/v1/artifacts   docs at {base}/api/docs/",
                    "  Passwords are new on every run of `demo`.",
                    f"  Agent key for {DEMO_AGENT} (shown once; curl -H 'Authorization: Bearer <key>'):",
                    secret,
                ]
            )
        )


def _tag_review(agent: Agent, number: int, verdict: str) -> None:
    url = f"https://github.com/o/r/pull/{number}"
    services.artifact_tag(
        agent=agent,
        kind="reviewed-pr",
        key=url,
        title=f"Reviewed {url}",
        data={"url": url, "verdict": verdict},
        session_id=DEMO_SESSION,
        turn_id=f"t-{number - 6}",
        contents=f"## Review of {url}\n\nVerdict: **{verdict}**.\n",
        content_type="text/markdown",
    )
