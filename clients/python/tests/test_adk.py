"""``AgentArtifactsService`` against ADK's own ``InMemoryArtifactService``: the same calls, the same
answers (a differential test), then what only a real service has (owners, trimmed history, refusals).

Needs google-adk (``pip install "./clients/python[adk,test]"``). Without it these tests skip, unless
``ARTIFACTS_KIT_ADK=required`` (as ``.ci/run`` sets), when they fail.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

import httpx
import pytest
from agent_artifacts_client import ArtifactsClient, ClientError
from conftest import Served

try:
    from agent_artifacts_client.adk import (  # ADK's own InputValidationError (ADK 1: ValueError)
        AgentArtifactsService,
        InputValidationError,
        same_rule_as_adk,
    )
    from google.adk.agents import BaseAgent
    from google.adk.apps import App
    from google.adk.artifacts import InMemoryArtifactService, artifact_util
    from google.adk.events import Event
    from google.adk.plugins.save_files_as_artifacts_plugin import SaveFilesAsArtifactsPlugin
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.genai import types
except ImportError:
    if os.environ.get("ARTIFACTS_KIT_ADK") == "required":
        raise
    pytest.skip("needs google-adk: pip install './clients/python[adk]'", allow_module_level=True)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def answer(value: Any) -> Any:
    """An answer in a form both services can be compared by: parts as their fields, versions
    without ``canonical_uri`` and ``create_time`` (a service's own address and clock)."""
    if isinstance(value, list):
        return [answer(v) for v in value]
    if isinstance(value, types.Part):
        return value.model_dump(exclude_none=True)
    if value is not None and hasattr(value, "canonical_uri"):
        return value.model_dump(exclude={"canonical_uri", "create_time"})
    return value


async def adk_session(service: Any, app: str, user: str) -> list[tuple[str, Any]]:
    """One ADK agent's artifact calls, in order; the answers of each step."""
    steps: list[tuple[str, Any]] = []
    s1, s2 = "s1", "s2"
    scope = {"app_name": app, "user_id": user}

    async def step(name: str, call: Any) -> Any:
        result = await call
        steps.append((name, answer(result)))
        return result

    text = types.Part(text="# Report\nfirst draft")
    png = types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG\r\n\x1a\n\x00"))
    await step("save text", service.save_artifact(**scope, session_id=s1, filename="report.md",
                                                  artifact=text))  # fmt: skip
    await step("save bytes", service.save_artifact(
        **scope, session_id=s1, filename="chart.png", artifact=png,
        custom_metadata={"source": "plot", "dpi": 144},
    ))  # fmt: skip
    for n, body in enumerate(["second draft", "third draft"], start=2):
        await step(f"re-save {n}", service.save_artifact(
            **scope, session_id=s1, filename="report.md", artifact=types.Part(text=body),
            custom_metadata={"draft": n},
        ))  # fmt: skip
    profile = types.Part(
        inline_data=types.Blob(mime_type="application/json", data=b'{"lang": "en"}')
    )
    await step("save user:", service.save_artifact(
        **scope, session_id=s1, filename="user:profile.json", artifact=profile))  # fmt: skip
    await step("re-save user: from another session", service.save_artifact(
        **scope, session_id=s2, filename="user:profile.json",
        artifact=types.Part(
            inline_data=types.Blob(mime_type="application/json", data=b'{"lang": "fr"}')
        ),
    ))  # fmt: skip
    ref = types.Part(file_data=types.FileData(
        file_uri=f"artifact://apps/{app}/users/{user}/sessions/{s1}/artifacts/report.md/versions/1"
    ))  # fmt: skip
    await step("save a reference", service.save_artifact(
        **scope, session_id=s1, filename="pointer", artifact=ref))  # fmt: skip
    link = types.Part(
        file_data=types.FileData(file_uri="https://x/y.pdf", mime_type="application/pdf")
    )
    await step("save a file link", service.save_artifact(
        **scope, session_id=s1, filename="paper", artifact=link))  # fmt: skip

    for version in (None, 0, 1, 2, 3):  # -1: ADK 1 answers the latest, ADK 2 None
        await step(f"load report.md v{version}", service.load_artifact(
            **scope, session_id=s1, filename="report.md", version=version))  # fmt: skip
    await step("load bytes", service.load_artifact(**scope, session_id=s1, filename="chart.png"))
    await step("load user: from s2", service.load_artifact(
        **scope, session_id=s2, filename="user:profile.json"))  # fmt: skip
    await step("load user: v0 from s1", service.load_artifact(
        **scope, session_id=s1, filename="user:profile.json", version=0))  # fmt: skip
    await step("load reference", service.load_artifact(**scope, session_id=s1, filename="pointer"))
    await step("load file link", service.load_artifact(**scope, session_id=s1, filename="paper"))
    await step("load in the wrong session", service.load_artifact(
        **scope, session_id=s2, filename="report.md"))  # fmt: skip
    await step("load never saved", service.load_artifact(
        **scope, session_id=s1, filename="nothing.txt"))  # fmt: skip

    await step("keys s1", service.list_artifact_keys(**scope, session_id=s1))
    await step("keys s2", service.list_artifact_keys(**scope, session_id=s2))
    await step("keys of a new session", service.list_artifact_keys(**scope, session_id="s9"))
    await step("keys of the user", service.list_artifact_keys(**scope))
    await step("keys of another user", service.list_artifact_keys(
        app_name=app, user_id=user + "-other", session_id=s1))  # fmt: skip

    for name in ("report.md", "chart.png", "user:profile.json", "nothing.txt"):
        await step(f"versions {name}", service.list_versions(
            **scope, session_id=s1, filename=name))  # fmt: skip
        await step(f"version metadata {name}", service.list_artifact_versions(
            **scope, session_id=s1, filename=name))  # fmt: skip
    for version in (None, 0, 2, 7):
        await step(f"get version {version}", service.get_artifact_version(
            **scope, session_id=s1, filename="report.md", version=version))  # fmt: skip

    await step("delete", service.delete_artifact(**scope, session_id=s1, filename="report.md"))
    await step("load after delete", service.load_artifact(
        **scope, session_id=s1, filename="report.md"))  # fmt: skip
    await step("load v1 after delete", service.load_artifact(
        **scope, session_id=s1, filename="report.md", version=1))  # fmt: skip
    await step("versions after delete", service.list_versions(
        **scope, session_id=s1, filename="report.md"))  # fmt: skip
    await step("get version after delete", service.get_artifact_version(
        **scope, session_id=s1, filename="report.md"))  # fmt: skip
    await step("keys after delete", service.list_artifact_keys(**scope, session_id=s1))
    await step("delete again", service.delete_artifact(
        **scope, session_id=s1, filename="report.md"))  # fmt: skip
    await step("save after delete", service.save_artifact(
        **scope, session_id=s1, filename="report.md", artifact=types.Part(text="anew")))  # fmt: skip
    await step("load after re-save", service.load_artifact(
        **scope, session_id=s1, filename="report.md"))  # fmt: skip
    await step("versions after re-save", service.list_versions(
        **scope, session_id=s1, filename="report.md"))  # fmt: skip
    await step("delete user:", service.delete_artifact(
        **scope, session_id=s2, filename="user:profile.json"))  # fmt: skip
    await step("keys at the end", service.list_artifact_keys(**scope, session_id=s1))
    return steps


@pytest.fixture
def ours(served: Served):
    return AgentArtifactsService(base_url=served.base, token=served.notes_key, agent="notes")


async def test_same_calls_same_answers_as_adks_in_memory_service(ours, served: Served):
    app = unique("app")
    before = time.time()
    theirs = await adk_session(InMemoryArtifactService(), app, "uma")
    mine = await adk_session(ours, app, "uma")
    assert [name for name, _ in mine] == [name for name, _ in theirs]
    for (name, got), (_, want) in zip(mine, theirs, strict=True):
        assert got == want, name
    # What differs by nature: a version's address is this service's content URL (it serves the
    # bytes to the agent's key), its create_time the moment the tag committed here.
    versions = await ours.list_artifact_versions(
        app_name=app, user_id="uma", session_id="s1", filename="chart.png"
    )
    [only] = versions
    assert before - 1 <= only.create_time <= time.time() + 1
    assert only.canonical_uri.startswith(f"{served.base}/notes/v1/artifacts/art_")
    fetched = httpx.get(only.canonical_uri, headers={"Authorization": f"Bearer {served.notes_key}"})
    assert fetched.content == b"\x89PNG\r\n\x1a\n\x00"
    assert fetched.headers["content-type"] == "image/png"


async def test_records_are_keyed_by_adks_uri_and_owned_by_the_adk_user(ours, served: Served):
    app = unique("app")
    await ours.save_artifact(
        app_name=app, user_id="uma", session_id="s1", filename="report.md",
        artifact=types.Part(text="hi"), custom_metadata={"a": [1, 2]},
    )  # fmt: skip
    await ours.save_artifact(
        app_name=app, user_id="someone-not-on-the-server", session_id="s1", filename="x.txt",
        artifact=types.Part(text="no owner"),
    )  # fmt: skip
    with ArtifactsClient(served.base, served.notes_key, "notes") as key:
        [record] = key.list(key=f"artifact://apps/{app}/users/uma/sessions/s1/artifacts/report.md")
        assert record.kind == "adk-artifact" and record.title == "report.md"
        assert record.content.content_type == "text/plain; charset=utf-8"
        assert record.data["customMetadata"] == {"a": [1, 2]} and record.version == 1
        session = key.session(record.session_id)
        assert session["owner"] == "uma" and record.session_id.endswith("-s1")
        [other] = key.list(
            key=f"artifact://apps/{app}/users/someone-not-on-the-server/sessions/s1/artifacts/x.txt"
        )
        assert key.session(other.session_id)["owner"] is None
        assert other.session_id != record.session_id  # same ADK session id, another user
    with ArtifactsClient(served.base, served.user_token, "notes") as uma:  # uma sees her own
        assert [r.id for r in uma.list(session_id=record.session_id)] == [record.id]
        with pytest.raises(ClientError) as err:
            uma.get(other.id)
        assert err.value.status == 404


async def test_history_past_keep_versions_loads_as_none_and_numbering_goes_on(ours):
    scope = {"app_name": unique("app"), "user_id": "uma", "session_id": "s", "filename": "log"}
    saved = [
        await ours.save_artifact(**scope, artifact=types.Part(text=f"v{n}")) for n in range(12)
    ]
    assert saved == list(range(12))
    assert await ours.list_versions(**scope) == list(range(2, 12))  # the newest 10 are kept
    assert await ours.load_artifact(**scope, version=1) is None
    assert (await ours.load_artifact(**scope, version=2)).text == "v2"
    assert await ours.get_artifact_version(**scope, version=0) is None
    assert await ours.load_artifact(**scope, version=-1) is None  # as ADK 2 (ADK 1: the latest)
    assert (await ours.get_artifact_version(**scope)).version == 11
    assert await ours.save_artifact(**scope, artifact=types.Part(text="v12")) == 12


async def test_refusals_are_raised(served: Served, ours):
    bad = AgentArtifactsService(base_url=served.base, token="aak_nope_nope", agent="notes")
    scope = {"app_name": unique("app"), "user_id": "u", "session_id": "s", "filename": "f"}
    with pytest.raises(ClientError) as err:
        await bad.save_artifact(**scope, artifact=types.Part(text="x"))
    assert err.value.status == 401
    with pytest.raises(ClientError) as err:
        await bad.load_artifact(**scope)
    assert err.value.status == 401
    declared = AgentArtifactsService(base_url=served.base, token=served.key, agent="reviewer")
    with pytest.raises(ClientError) as err:  # an agent with kinds declared takes only those
        await declared.save_artifact(**scope, artifact=types.Part(text="x"))
    assert err.value.code == "unknown_kind"
    with pytest.raises(ValueError, match="Not supported artifact type"):
        await ours.save_artifact(**scope, artifact=types.Part())
    with pytest.raises(ValueError, match="same app and user"):
        await ours.save_artifact(**scope, artifact=types.Part(file_data=types.FileData(
            file_uri="artifact://apps/other/users/u/artifacts/f/versions/0")))  # fmt: skip
    with pytest.raises(ClientError) as err:
        await ours.save_artifact(
            **scope,
            artifact=types.Part(inline_data=types.Blob(mime_type="text/html,x", data=b"x")),
        )
    assert err.value.code == "invalid_content_type"
    assert await ours.list_versions(**scope) == []  # a refused save changed nothing


async def test_no_session_means_the_user_scope_as_adks_base_class_says(ours):
    """``InMemoryArtifactService`` refuses a session-less name without ``user:``; the base class
    and ``FileArtifactService`` take it as user-scoped, and so does this service."""
    scope = {"app_name": unique("app"), "user_id": "uma"}
    assert await ours.save_artifact(**scope, filename="prefs", artifact=types.Part(text="a")) == 0
    from_session = await ours.load_artifact(**scope, session_id="s1", filename="user:prefs")
    assert from_session == types.Part(text="a")
    again = types.Part(text="b")
    assert (
        await ours.save_artifact(**scope, session_id="s1", filename="user:prefs", artifact=again)
        == 1
    )
    assert await ours.load_artifact(**scope, filename="prefs") == again
    assert await ours.list_artifact_keys(**scope) == ["user:prefs"]  # as last saved
    # A Part as a dict (camelCase, as ADK 2's ensure_part takes it) is a Part.
    as_dict = {"inlineData": {"mimeType": "application/json", "data": b"{}"}}
    assert await ours.save_artifact(**scope, filename="d", artifact=as_dict) == 0
    assert (await ours.load_artifact(**scope, filename="d")).inline_data.data == b"{}"


# Every input class ADK's services refuse in an app_name, user_id or session_id, and ADK's words
# for it (google-adk 2.13's validate_path_segment; the cases of ADK's own artifact-service tests).
TRAVERSAL = "{field} {value!r} must not contain traversal segments."
ROOTED = "{field} {value!r} must not be an absolute path or start with a slash."
DRIVE = "{field} {value!r} must not be drive-qualified."
RESERVED = "{field} {value!r} must not contain reserved path segments."
UNSAFE_NAMES = {
    "empty": ("", "{field} must not be empty."),
    "blank": ("  \t", "{field} must not be empty."),
    "parent": ("../escape", TRAVERSAL),
    "parents": ("../../etc", TRAVERSAL),
    "parent inside": ("foo/../../bar", TRAVERSAL),
    "parent after backslash": ("x\\..", TRAVERSAL),
    "dot-dot": ("..", TRAVERSAL),
    "dot": (".", TRAVERSAL),
    "NUL": ("null\x00byte", "{field} must not contain null bytes."),
    "absolute": ("/etc/passwd", ROOTED),
    "leading slash": ("/leading/slash", ROOTED),
    "leading backslash": ("\\leading\\backslash", ROOTED),
    "drive backslash": ("C:\\absolute", DRIVE),
    "drive slash": ("C:/absolute", DRIVE),
    "drive-relative": ("C:drive-relative", DRIVE),
    "sessions segment": ("victim/sessions/s1", RESERVED),
    "artifacts segment": ("victim/artifacts", RESERVED),
    "apps segment": ("victim/apps", RESERVED),
    "users segment": ("victim/users", RESERVED),
    "versions segment": ("victim/versions", RESERVED),
    "reserved segment, other case, backslash": ("a\\Versions", RESERVED),
}
FIELDS = ("app_name", "user_id", "session_id")
SAFE = {"app_name": "app", "user_id": "uma", "session_id": "s1"}


def calls(names: dict[str, Any]) -> dict[str, Any]:
    """Every method that takes these names, as a coroutine factory (session-scoped file)."""
    one = {**names, "filename": "notes.txt"}
    text = types.Part(text="x")
    return {
        "save_artifact": lambda s: s.save_artifact(**one, artifact=text),
        "load_artifact": lambda s: s.load_artifact(**one),
        "list_artifact_keys": lambda s: s.list_artifact_keys(**names),
        "delete_artifact": lambda s: s.delete_artifact(**one),
        "list_versions": lambda s: s.list_versions(**one),
        "list_artifact_versions": lambda s: s.list_artifact_versions(**one),
        "get_artifact_version": lambda s: s.get_artifact_version(**one),
    }


def count_requests(service: AgentArtifactsService) -> list[str]:
    """The requests the service's HTTP client sends from now on (httpx's own event hooks)."""
    sent: list[str] = []

    async def seen(request: httpx.Request) -> None:
        sent.append(f"{request.method} {request.url.path}")

    http = service.client.http
    hooks = http.event_hooks
    hooks["request"] = [*hooks["request"], seen]
    http.event_hooks = hooks
    return sent


async def refusal(call: Any) -> str:
    with pytest.raises(InputValidationError) as err:
        await call
    return str(err.value)


@pytest.mark.parametrize("case", list(UNSAFE_NAMES))
async def test_unsafe_names_raise_adks_input_validation_error_before_any_request(ours, case):
    value, words = UNSAFE_NAMES[case]
    sent = count_requests(ours)
    adk_has_the_rule = hasattr(artifact_util, "validate_path_segment")
    if adk_has_the_rule:  # then the error is ADK's own class
        assert InputValidationError.__module__ == "google.adk.errors.input_validation_error"
    for field in FIELDS:
        names = {**SAFE, field: value}
        want = words.format(field=field, value=value)
        theirs = calls(names)
        for method, call in calls(names).items():
            assert await refusal(call(ours)) == want, (field, method)
            if adk_has_the_rule:  # ADK's own service says the same (an ADK older than 2.x: no rule)
                assert await refusal(theirs[method](InMemoryArtifactService())) == want
    assert sent == []  # refused in the adapter: nothing reached the server
    assert await ours.load_artifact(**SAFE, filename="never-saved") is None
    assert sent  # and the hook does see what is sent


def test_the_kits_copy_of_adks_rule_words_every_case_as_adk():
    """An ADK without ``validate_path_segment`` gets the kit's copy of it: the same answers."""
    rule = getattr(artifact_util, "validate_path_segment", None)
    allowed = ["group/user123", "mdbuser/username", "sessions", "user", "a/b", "ab:c", "s1"]
    for value, words in [*UNSAFE_NAMES.values(), *((v, None) for v in allowed)]:
        for field in FIELDS:
            want = None if words is None else words.format(field=field, value=value)
            try:
                same_rule_as_adk(value, field)
                got = None
            except InputValidationError as error:
                got = str(error)
            assert got == want, (field, value)
            if rule is not None:
                try:
                    rule(value, field)
                    adks = None
                except InputValidationError as error:
                    adks = str(error)
                assert adks == want, (field, value)


async def test_a_user_id_aimed_at_another_users_session_is_refused_and_stores_nothing(
    ours, served: Served
):
    app = unique("app")
    await ours.save_artifact(
        app_name=app, user_id="victim", session_id="s1", filename="notes.txt",
        artifact=types.Part(text="victim data"),
    )  # fmt: skip
    with pytest.raises(InputValidationError, match="must not contain reserved path segments"):
        await ours.save_artifact(
            app_name=app, user_id="victim/sessions/s1", filename="user:notes.txt",
            artifact=types.Part(text="attacker data"),
        )  # fmt: skip
    with pytest.raises(InputValidationError, match="must not contain null bytes"):
        await ours.save_artifact(
            app_name=app, user_id="victim", session_id="s1\x00", filename="notes.txt",
            artifact=types.Part(text="attacker data"),
        )  # fmt: skip
    loaded = await ours.load_artifact(
        app_name=app, user_id="victim", session_id="s1", filename="notes.txt"
    )
    assert loaded == types.Part(text="victim data")
    with ArtifactsClient(served.base, served.notes_key, "notes") as key:
        stored = [r for r in key.list(kind="adk-artifact") if r.data.get("app") == app]
        assert [(r.data["user"], r.data["filename"]) for r in stored] == [("victim", "notes.txt")]


async def test_names_adk_allows_still_work_and_a_user_artifacts_session_is_not_checked(ours):
    app = "projects/123/locations/us-central1/reasoningEngines/456"
    for user in ("group/user123", "mdbuser/username"):
        scope = {"app_name": app, "user_id": user, "session_id": unique("sess")}
        part = types.Part(inline_data=types.Blob(mime_type="text/plain", data=b"data"))
        assert await ours.save_artifact(**scope, filename="safe.txt", artifact=part) == 0
        assert await ours.load_artifact(**scope, filename="safe.txt") == part
    # A session called "user" is its own session, apart from the user scope.
    scope = {"app_name": unique("app"), "user_id": "uma"}
    await ours.save_artifact(
        **scope, session_id="user", filename="a", artifact=types.Part(text="s")
    )
    await ours.save_artifact(**scope, filename="a", artifact=types.Part(text="u"))
    assert (await ours.load_artifact(**scope, session_id="user", filename="a")).text == "s"
    assert (await ours.load_artifact(**scope, filename="a")).text == "u"
    # As in ADK, a user: artifact does not use the session id, so a bad one is not refused.
    got = await ours.load_artifact(**scope, session_id="../x", filename="user:a")
    assert got == types.Part(text="u")
    with pytest.raises(InputValidationError, match="user_id must be a string"):
        await ours.load_artifact(app_name="app", user_id=7, filename="user:a")


if "BaseAgent" in globals():

    class ArtifactReader(BaseAgent):
        """An agent with no model: answers with every artifact of its session, as loaded."""

        async def _run_async_impl(self, ctx: Any) -> Any:
            service, scope = ctx.artifact_service, {
                "app_name": ctx.app_name, "user_id": ctx.user_id, "session_id": ctx.session.id,
            }  # fmt: skip
            loaded = {
                name: (await service.load_artifact(**scope, filename=name)).model_dump(
                    exclude_none=True, mode="json"
                )
                for name in await service.list_artifact_keys(**scope)
            }
            text = json.dumps(loaded, sort_keys=True)
            yield Event(
                invocation_id=ctx.invocation_id,
                author=self.name,
                content=types.Content(role="model", parts=[types.Part(text=text)]),
            )


async def run_a_turn(artifacts: Any) -> list[str]:
    """A turn through ADK's own Runner: its SaveFilesAsArtifactsPlugin saves the user's file with
    the artifact service, then the agent lists and loads what the session holds."""
    sessions = InMemorySessionService()
    app = App(
        name=f"app_{uuid.uuid4().hex[:8]}",
        root_agent=ArtifactReader(name="reader"),
        plugins=[SaveFilesAsArtifactsPlugin()],
    )
    runner = Runner(app=app, session_service=sessions, artifact_service=artifacts)
    session = await sessions.create_session(app_name=app.name, user_id="uma")
    upload = types.Blob(mime_type="text/csv", data=b"a,b\n1,2\n", display_name="table.csv")
    message = types.Content(
        role="user", parts=[types.Part(text="see attached"), types.Part(inline_data=upload)]
    )
    answers = []
    async for event in runner.run_async(user_id="uma", session_id=session.id, new_message=message):
        if event.content and event.content.parts and event.author == "reader":
            answers.append(event.content.parts[0].text)
    return answers


async def test_adks_runner_saves_and_loads_through_it_as_through_its_own(ours):
    theirs = await run_a_turn(InMemoryArtifactService())
    assert len(theirs) == 1 and "table.csv" in theirs[0]
    assert await run_a_turn(ours) == theirs
