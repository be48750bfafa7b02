"""Each REST route asks the access table: every route of the URLconf names its action, and the
statuses the route matrix observes (tests/rest/test_access_matrix.py, run against the server)
are the ones ``access.TABLE`` gives that action — so a route that asked another rule, or wrote
one of its own, would disagree here."""

from __future__ import annotations

from pathlib import Path

import pytest

from artifacts_app import access
from artifacts_app.access import Action
from tests.rest.test_access_matrix import MATRIX, urlconf_routes

ROUTE_ACTION: dict[tuple[str, str], Action] = {
    ("sessions", "GET"): Action.READ,
    ("sessions", "POST"): Action.CREATE_SESSION,
    ("sessions/<session_id>", "GET"): Action.READ,
    ("artifacts", "GET"): Action.READ,
    ("artifacts", "POST"): Action.TAG,
    ("artifacts/kinds", "GET"): Action.READ,
    ("artifacts/kinds", "PUT"): Action.DECLARE,
    ("artifacts/<artifact_id>", "GET"): Action.READ,
    ("artifacts/<artifact_id>", "DELETE"): Action.DELETE,
    ("artifacts/<artifact_id>/content", "GET"): Action.READ,
    ("artifacts/<artifact_id>/content", "PUT"): Action.TAG,
    ("artifacts/<artifact_id>/pin", "PUT"): Action.PIN,
    ("artifacts/<artifact_id>/pin", "DELETE"): Action.PIN,
    ("artifacts/<artifact_id>/versions", "GET"): Action.READ,
    ("artifacts/<artifact_id>/versions/<number>", "GET"): Action.READ,
    ("artifacts/<artifact_id>/versions/<number>/content", "GET"): Action.READ,
    ("artifacts/<artifact_id>/versions/<number>/diff", "GET"): Action.READ,
    ("artifacts/<artifact_id>/versions/<number>/restore", "POST"): Action.RESTORE,
    ("tools/tag_artifact", "GET"): Action.TOOL_DEFINITION,
    ("tools/tag_artifact", "POST"): Action.TAG,
    ("webhooks", "GET"): Action.WEBHOOK_READ,
    ("webhooks", "POST"): Action.WEBHOOK_CREATE,
    ("webhooks/<webhook_id>", "GET"): Action.WEBHOOK_READ,
    ("webhooks/<webhook_id>", "PATCH"): Action.WEBHOOK_CHANGE,
    ("webhooks/<webhook_id>", "DELETE"): Action.WEBHOOK_DELETE,
    ("webhooks/<webhook_id>/secret", "POST"): Action.WEBHOOK_CHANGE,
    ("webhooks/<webhook_id>/deliveries", "GET"): Action.WEBHOOK_READ,
    ("webhooks/<webhook_id>/replay", "POST"): Action.WEBHOOK_CHANGE,
    ("uploads", "POST"): Action.UPLOAD,
    ("uploads/<upload_id>", "PATCH"): Action.UPLOAD,
    ("uploads/<upload_id>", "DELETE"): Action.UPLOAD,
}
# Actions asked through ``access.require_hidden``: a refusal there is a 404, as for nothing.
HIDDEN = {Action.UPLOAD}

# The matrix's callers as the table knows them. The matrix's object (record, session) lies in
# the owner's session, so "own sessions" lets the owner in and keeps the other user out.
KIND = {"agent": access.AGENT, "staff": access.STAFF, "owner": access.USER}
REFUSED = (401, 403)


def test_every_route_names_its_action():
    assert set(ROUTE_ACTION) == urlconf_routes() == set(MATRIX)


@pytest.mark.parametrize("route", sorted(ROUTE_ACTION), ids=" ".join)
def test_route_answers_as_the_table_says(route: tuple[str, str]):
    statuses = MATRIX[route]
    rule = access.TABLE[ROUTE_ACTION[route]]
    refused = (401, 404) if ROUTE_ACTION[route] in HIDDEN else REFUSED
    assert statuses["none"] == 401
    assert statuses["other_agent"] == refused[1]
    for caller, kind in KIND.items():
        # Let in, a route may still answer 404 or 409 for what it finds; never 401 or 403.
        assert (statuses[caller] not in refused) == (kind in rule.kinds), caller
    # The other user: refused (403), or the owner's object hidden (404) — and lists, which hold
    # no single object, show it its own (200, ids checked by the matrix).
    lists = route in (("sessions", "GET"), ("artifacts", "GET"), ("artifacts/kinds", "GET"))
    if access.USER not in rule.kinds:
        assert statuses["other_user"] in (403, 404)
    elif lists or route == ("sessions", "POST"):
        assert statuses["other_user"] in (200, 201)
    else:
        assert statuses["other_user"] == 404


def test_entry_points_write_no_rule_of_their_own():
    """Only access.py compares kinds of caller: the entry points ask it."""
    root = Path(__file__).resolve().parents[2] / "artifacts_app"
    found = []
    for path in root.rglob("*.py"):
        if path.name == "access.py" and path.parent == root:
            continue
        text = path.read_text()
        for name in ("AGENT", "STAFF", "USER", "ANONYMOUS"):
            if (
                f"access.{name})" in text
                or f"access.{name}," in text
                or f"== access.{name}" in text
            ):
                found.append(f"{path.relative_to(root)}: access.{name}")
        if "caller.kind" in text:
            found.append(f"{path.relative_to(root)}: caller.kind")
    assert found == []
