"""Sessions under ``/<slug>/v1/sessions`` (API.md "HTTP routes"): list, create, one."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request

from artifacts_app import access, selectors, services
from artifacts_app.errors import ArtifactError
from artifacts_app.rest import serializers as s
from artifacts_app.rest.filters import PageFilter, cleaned
from artifacts_app.rest.pagination import next_url
from artifacts_app.rest.schema import CURSOR, JSON_BODY, LIMIT, PAGE, errors
from artifacts_app.rest.views.base import AgentView, json_response, object_body

SESSION_FIELDS = frozenset({"id", "owner"})


class SessionsView(AgentView):
    """Sessions of the agent: list (all three callers) and create (agent key, user)."""

    @extend_schema(
        operation_id="sessions_list",
        summary="Sessions the caller may see, newest first",
        parameters=[LIMIT, CURSOR],
        responses={200: s.SessionPageSerializer, **errors(*PAGE)},
    )
    def get(self, request: Request, slug: str) -> HttpResponse:
        agent = self.agent()
        visible = access.visible_sessions(self.caller(), agent)
        query = cleaned(PageFilter, request.query_params)
        page = selectors.sessions_page(
            agent=agent, visible=visible, limit=query["limit"], cursor=query["cursor"]
        )
        return json_response(
            {
                "results": [selectors.session_json(row) for row in page.rows],
                "next": next_url(request, page.next_cursor),
            }
        )

    @extend_schema(
        operation_id="sessions_create",
        summary="Create a session (agent key: any owner or none; user: itself)",
        request=s.SessionCreateSerializer,
        responses={
            201: s.SessionSerializer,
            **errors(
                *JSON_BODY, "invalid_owner", "unknown_user", "invalid_session_id", "session_exists"
            ),
        },
    )
    def post(self, request: Request, slug: str) -> HttpResponse:
        agent = self.agent()
        caller = self.caller()
        access.require(caller, agent, access.Action.READ)  # 401 / 403 before the body is looked at
        body = object_body(request.data, SESSION_FIELDS)
        owner = body.get("owner")
        if owner is not None and not isinstance(owner, str):
            raise ArtifactError(
                "invalid_owner", "`owner` is a username or null.", {"field": "owner"}
            )
        owner = access.require_session_create(caller, agent, owner)
        session = services.session_create(agent=agent, sid=body.get("id"), owner=owner)
        row = selectors.session_values(agent=agent, sid=session.sid)
        return json_response(selectors.session_json(row), status=201)


class SessionDetailView(AgentView):
    """One session, if the caller may see it (hidden looks missing: 404)."""

    @extend_schema(
        operation_id="sessions_get",
        summary="One session",
        responses={200: s.SessionSerializer, **errors("unknown_session")},
    )
    def get(self, request: Request, slug: str, session_id: str) -> HttpResponse:
        agent = self.agent()
        visible = access.visible_sessions(self.caller(), agent)
        row = selectors.session_values(agent=agent, sid=session_id, visible=visible)
        return json_response(selectors.session_json(row))
