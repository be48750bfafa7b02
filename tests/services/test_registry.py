from __future__ import annotations

import io

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

from artifacts_app import registry, services
from artifacts_app.models import Agent


def test_kind_needs_a_description():
    with pytest.raises(ImproperlyConfigured):
        registry.Kind("  ")


def test_define_artifacts_refuses_bad_names_and_max():
    with pytest.raises(ImproperlyConfigured):
        registry.define_artifacts(kinds={"bad name": registry.Kind("x")})
    with pytest.raises(ImproperlyConfigured):
        registry.define_artifacts(kinds={}, max=0)


def test_demo_agent_is_declared_as_api_md_shows():
    from agent_site.agents import reviewer

    decl = reviewer.artifacts
    assert set(decl.kinds) == {"reviewed-pr", "report"}
    assert decl.agent_tool is True and decl.max == 1000
    assert decl.kinds["reviewed-pr"].json_schema()["required"] == ["url"]
    assert decl.kinds["report"].schema is None


def test_the_sync_step_makes_the_declared_agents(db):
    # The step our migrate runs after Django's (the next test runs migrate itself). Not read off
    # the test database as set up: a transactional test that ran before on this worker flushed it.
    Agent.objects.filter(slug__in=["reviewer", "strict"]).delete()
    services.agents_sync_declared()
    assert Agent.objects.filter(slug="reviewer", module="agent_site.agents.reviewer").exists()
    assert Agent.objects.get(slug="strict").max_artifacts == 5


def test_migrate_makes_and_updates_declared_agents(db):
    Agent.objects.filter(slug="strict").delete()
    Agent.objects.filter(slug="reviewer").update(max_artifacts=3)
    call_command("migrate", verbosity=0)
    assert Agent.objects.get(slug="strict").max_artifacts == 5
    assert Agent.objects.get(slug="reviewer").max_artifacts == 1000


def test_migrate_plan_changes_nothing(db):
    Agent.objects.filter(slug="strict").delete()
    call_command("migrate", plan=True, stdout=io.StringIO())
    assert not Agent.objects.filter(slug="strict").exists()


def _run_checks() -> list[checks.CheckMessage]:
    return registry.check_declared_agents()


def test_check_agent_tool_without_kinds_is_an_error(settings):
    settings.ARTIFACTS_AGENTS = {"toolless": "tests.agents.toolless"}
    ids = [m.id for m in _run_checks()]
    assert ids == ["artifacts.E003"]
    assert isinstance(_run_checks()[0], checks.Error)


def test_check_authored_tool_shadows_builtin_with_warning(settings):
    settings.ARTIFACTS_AGENTS = {"shadowing": "tests.agents.shadowing"}
    messages = _run_checks()
    assert [m.id for m in messages] == ["artifacts.W001"]
    assert "tests.agents.shadowing" in messages[0].msg
    spec = registry.spec_for_declared("shadowing", "tests.agents.shadowing")
    assert spec.authored_tool is not None and not spec.tool_enabled


@pytest.mark.parametrize("slug", ["admin", "api", "Bad", "-x", "a" * 64])
def test_check_refuses_bad_or_reserved_slugs(settings, slug):
    settings.ARTIFACTS_AGENTS = {slug: "agent_site.agents.reviewer"}
    assert [m.id for m in _run_checks()] == ["artifacts.E001"]


def test_check_reports_unimportable_module(settings):
    settings.ARTIFACTS_AGENTS = {"ghost": "tests.agents.does_not_exist"}
    assert [m.id for m in _run_checks()] == ["artifacts.E002"]


def test_freeform_spec_comes_from_the_row(db):
    agent = Agent.objects.create(slug="loose", max_artifacts=7)
    spec = registry.spec_for(agent)
    assert spec.freeform and spec.max == 7 and not spec.tool_enabled
