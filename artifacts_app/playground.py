"""The playground: watch one session's artifacts appear, live, grouped by turn.

The page is rendered with the visible artifacts of the chosen session (selectors + access, the same
rule as REST) and the agent's ``last_seq`` read *before* the list, so the websocket's ``?after=``
replay covers anything tagged in between (a replayed tag only refreshes its card). After that the
script in ``static/playground/`` follows the session's websocket and reads full records from REST.

The picker lists the sessions the caller may see with owner, creation time and a bounded count
(``selectors.session_summaries``); with no session named it opens the newest, and ``?q=`` finds one
by id (``selectors.sessions_search``). ``preview`` answers a card's rendered preview, the fragment of
``previews`` (the admin's renderer), for a record or version the caller may see.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST, require_safe

from artifacts_app import access, media, previews, selectors, services
from artifacts_app.errors import ArtifactError, NotFoundError
from artifacts_app.registry import spec_for
from artifacts_app.selectors import versions
from artifacts_app.values import check_text

SESSIONS_SHOWN = 50
ARTIFACTS_SHOWN = 100


def _page_url(agent: str, session: str | None = None) -> str:
    query = {"agent": agent}
    if session:
        query["session"] = session
    return "/playground/?" + urlencode(query)


def _option(summary: selectors.SessionSummary) -> dict[str, str]:
    """A session as the picker shows it: id, owner, creation time and (bounded) artifact count."""
    return {
        "sid": summary.sid,
        "owner": summary.owner or "no owner",
        "created": selectors.iso_seconds(summary.created_at),
        "last": selectors.iso_seconds(summary.last_activity),
        "count": summary.count_label,
    }


def _search(
    request: HttpRequest, context: dict[str, Any], agent: Any, visible: Any, text: str
) -> HttpResponse:
    """Search by id: the exact id opens at once; otherwise the picker lists the ids that start
    with the text (selectors.sessions_search says how that stays bounded)."""
    try:
        found = selectors.sessions_search(agent=agent, visible=visible, text=text)
    except ArtifactError as exc:
        messages.error(request, exc.message)
        found = []
    text = text.strip()
    if found and found[0].sid == text:
        return HttpResponseRedirect(_page_url(agent.slug, text))
    context.update(sessions=[_option(s) for s in found], search=text)
    if not found and text:
        messages.info(
            request, f"No session of {agent.slug!r} you can see has an id starting {text!r}."
        )
    return render(request, "playground/index.html", context)


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

    visible = access.visible_sessions(caller, agent)
    sid = request.GET.get("session")
    text = request.GET.get("q")
    kinds = _kinds(caller, agent)
    context.update(kinds=kinds, find=request.GET.get("find"), kind=request.GET.get("kind") or "")
    if context["find"] is not None and not sid:
        return _find(request, context, caller, agent)
    if text is not None and not sid:
        return _search(request, context, agent, visible, text)
    newest, _ = selectors.session_summaries(agent=agent, visible=visible, limit=SESSIONS_SHOWN)
    context["sessions"] = [_option(s) for s in newest]
    if not sid:
        if newest:  # the newest session, preselected
            return HttpResponseRedirect(_page_url(agent.slug, newest[0].sid))
        return render(request, "playground/index.html", context)

    try:
        # Through the session visibility of ``access``: hidden and missing look the same.
        summary = selectors.session_summary(agent=agent, sid=sid, visible=visible)
    except ArtifactError:
        messages.error(request, f"There is no session {sid!r} of {agent.slug!r} that you can see.")
        return render(request, "playground/index.html", context, status=404)

    after = selectors.agent_last_seq(agent.pk)
    page = selectors.artifacts_page(
        agent=agent,
        visible=access.visible(caller, agent),
        session_id=sid,
        limit=ARTIFACTS_SHOWN,
    )
    current = _option(summary)
    if sid not in {option["sid"] for option in context["sessions"]}:
        context["sessions"].insert(0, current)
    context.update(
        session=sid,
        summary=current,
        config={
            "agent": agent.slug,
            "session": sid,
            "kind": context["kind"],
            "after": after,
            "capped": summary.count_capped or page.next_cursor is not None,
            "records": [record.to_json() for record in page.records()],
        },
    )
    return render(request, "playground/index.html", context)


def _kinds(caller: access.Caller, agent: Any) -> list[str]:
    """The kinds to filter by: those declared, else those among the newest records the caller
    may see (a bounded read)."""
    declared = list(spec_for(agent).kinds)
    if declared:
        return sorted(declared)
    return selectors.kinds_recent(agents=[agent.slug], visible=access.visible(caller, agent))


def _find(
    request: HttpRequest, context: dict[str, Any], caller: access.Caller, agent: Any
) -> HttpResponse:
    """Search the artifacts of the sessions the caller may see (API.md "Search": ``q``), of one
    kind or all, newest first: cards that open their session."""
    text = (context["find"] or "").strip()
    try:
        page = selectors.artifacts_page(
            agent=agent,
            visible=access.visible(caller, agent),
            q=text or None,
            kind=context["kind"] or None,
            limit=ARTIFACTS_SHOWN,
        )
        found = page.records()
        more = page.next_cursor is not None
    except ArtifactError as exc:
        messages.error(request, exc.message)
        found, more = [], False
    context.update(
        found=[
            {
                "record": record,
                "url": _page_url(agent.slug, record.session_id) if record.session_id else None,
                "data": _snippet(record.data),
            }
            for record in found
        ],
        found_more=more,
        find=text,
    )
    return render(request, "playground/index.html", context)


def _snippet(data: Any, chars: int = 600) -> str:
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return text if len(text) <= chars else text[: chars - 1] + "…"


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


def _previewed(request: HttpRequest) -> tuple[Any, str]:
    """The record (or one version of it) whose content the caller asks to see, and its URL.
    Read like every read: the caller through ``access``, the record through ``selectors``."""
    caller = access.caller_from_user(request.user)
    slug, artifact_id = request.GET.get("agent") or "", request.GET.get("id") or ""
    number = request.GET.get("version")
    for name, value in (("agent", slug), ("id", artifact_id), ("version", number)):
        check_text(value, field=name, code="invalid_query")
    agent = selectors.agent_get(slug)
    url = f"/{agent.slug}/v1/artifacts/{quote(artifact_id, safe='')}"
    if number is None:
        visible = access.visible(caller, agent)
        record = selectors.artifact_get(agent=agent, artifact_id=artifact_id, visible=visible)
        return record, url + "/content"
    n = versions.check_number(number)
    visible = access.visible(caller, agent)
    record = versions.version_get(agent=agent, artifact_id=artifact_id, number=n, visible=visible)
    return record, f"{url}/versions/{n}/content"


@require_GET
def preview(request: HttpRequest) -> HttpResponse:
    """A card's rendered preview: the HTML fragment of ``previews`` (the one renderer, which shows
    HTML, SVG and unknown types only as a download) for a content the caller may see."""
    if not request.user.is_authenticated:
        # Not login_required: a fetch would follow its redirect and insert the login page.
        return HttpResponse("Log in to see previews.", status=401, content_type="text/plain")
    try:
        record, url = _previewed(request)
        if record.content is None:
            raise NotFoundError("no_content", "This artifact has no content.")
    except ArtifactError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    content = record.content
    shown = previews.preview_blob(
        sha256=content.sha256,
        size=content.size,
        content_type=content.content_type,
        url=url,
        filename=media.download_name(
            key=record.key,
            title=record.title,
            artifact_id=record.id,
            content_type=content.content_type,
        ),
    )
    response = HttpResponse(shown.html, content_type="text/html; charset=utf-8")
    response["X-Preview-Kind"] = shown.kind
    return response


@require_safe
def landing(request: HttpRequest) -> HttpResponse:
    """``/``: where a person starts — the admin, the playground, the API docs (no redirect, so
    no loop whoever is logged in)."""
    return render(request, "landing.html", {})
