"""The playground: watch one session's artifacts appear, live.

The page is rendered with the visible artifacts of the chosen session (selectors + access, the same
rule as REST) and the agent's ``last_seq`` read *before* the list, so the websocket's ``?after=``
replay covers anything tagged in between (a replayed tag only refreshes its card). After that the
script in ``static/playground/`` follows the session's websocket and reads full records from REST.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_POST

from artifacts_app import access, selectors, services
from artifacts_app.errors import ArtifactError

SESSIONS_SHOWN = 50
ARTIFACTS_SHOWN = 100


def _page_url(agent: str, session: str | None = None) -> str:
    query = {"agent": agent}
    if session:
        query["session"] = session
    return "/playground/?" + urlencode(query)


@login_required
def playground(request: HttpRequest) -> HttpResponse:
    caller = access.caller_from_user(request.user)
    agents = selectors.agent_slugs()
    slug = request.GET.get("agent") or (agents[0] if agents else None)
    context: dict[str, Any] = {"agents": agents, "agent": slug, "sessions": [], "session": None}
    agent = selectors.agent_find(slug) if slug else None
    if agent is None:
        if slug:
            messages.error(request, f"There is no agent {slug!r}.")
        return render(request, "playground/index.html", context, status=404 if slug else 200)

    sessions = selectors.sessions_page(
        agent=agent, visible=access.session_visibility(caller, agent), limit=SESSIONS_SHOWN
    )
    context["sessions"] = [row["sid"] for row in sessions.rows]
    sid = request.GET.get("session")
    if not sid:
        return render(request, "playground/index.html", context)

    session = selectors.session_owner(agent.pk, sid)
    try:
        if session is None:
            raise ArtifactError(
                "unknown_session", f"There is no session {sid!r} of {agent.slug!r}."
            )
        access.can_watch_session(caller, agent, session.owner_id)
    except ArtifactError:
        # Hidden and missing look the same.
        messages.error(request, f"There is no session {sid!r} of {agent.slug!r} that you can see.")
        return render(request, "playground/index.html", context, status=404)

    after = selectors.agent_last_seq(agent.pk)
    page = selectors.artifacts_page(
        agent=agent,
        visible=access.artifact_visibility(caller, agent),
        session_id=sid,
        limit=ARTIFACTS_SHOWN,
    )
    if sid not in context["sessions"]:
        context["sessions"].insert(0, sid)
    context.update(
        session=sid,
        config={
            "agent": agent.slug,
            "session": sid,
            "after": after,
            "records": [record.to_json() for record in page.records()],
        },
    )
    return render(request, "playground/index.html", context)


@login_required
@require_POST
def new_session(request: HttpRequest) -> HttpResponse:
    slug = request.POST.get("agent") or ""
    caller = access.caller_from_user(request.user)
    try:
        agent = selectors.agent_get(slug)
        owner = access.require_session_create(caller, agent, None)
        session = services.session_create(agent=agent, owner=owner)
    except ArtifactError as exc:
        messages.error(request, exc.message)
        return HttpResponseRedirect(_page_url(slug) if slug else "/playground/")
    return HttpResponseRedirect(_page_url(agent.slug, session.sid))
