"""Creating agents: the one way an Agent row is made, freeform or declared in settings."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from artifacts_app.errors import ArtifactError, ConflictError
from artifacts_app.models import Agent
from artifacts_app.registry import DEFAULT_MAX, declared_agents, load_declaration, slug_problem


def agent_create(*, slug: str, max_artifacts: int = DEFAULT_MAX) -> Agent:
    """A freeform agent (no module): any non-empty kind, no tool, capped at ``max_artifacts``."""
    problem = slug_problem(slug)
    if problem:
        raise ArtifactError("invalid_slug", problem)
    if isinstance(max_artifacts, bool) or not isinstance(max_artifacts, int) or max_artifacts < 1:
        raise ArtifactError(
            "invalid_max", f"max must be a whole number of at least 1; got {max_artifacts!r}."
        )
    try:
        with transaction.atomic():
            return Agent.objects.create(slug=slug, max_artifacts=max_artifacts)
    except IntegrityError:
        raise ConflictError(
            "agent_exists", f"An agent {slug!r} exists already; choose another slug."
        ) from None


def agents_sync_declared() -> list[Agent]:
    """Make or update the row of every agent declared in ``settings.ARTIFACTS_AGENTS`` (its module
    and ``max``); answers the rows. A declared slug that is not valid is left to the system check."""
    synced = []
    for slug, module_path in declared_agents().items():
        if slug_problem(slug):
            continue
        _, declaration = load_declaration(module_path)
        agent, created = Agent.objects.get_or_create(
            slug=slug, defaults={"module": module_path, "max_artifacts": declaration.max}
        )
        if not created and (agent.module != module_path or agent.max_artifacts != declaration.max):
            Agent.objects.filter(pk=agent.pk).update(
                module=module_path, max_artifacts=declaration.max
            )
            agent.module, agent.max_artifacts = module_path, declaration.max
        synced.append(agent)
    return synced
