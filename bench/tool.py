"""What the tag_artifact tool costs on top of a tag, same database, same run.

    .venv/bin/python bench/tool.py [--n 2000]

Cases, each against ``services.artifact_tag`` of the same data (the baseline): ``services.tool_run``
of a model's call (shape checks, null-for-default stripping, pydantic validation, field renaming on
refusals), and the definition (``tool_definition``) uncached vs cached.
"""

from __future__ import annotations

import argparse
import secrets

from _setup import django_setup, rate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    args = parser.parse_args()
    django_setup()

    from django.db import connection

    from artifacts_app import services
    from artifacts_app.models import Agent
    from artifacts_app.registry import spec_for_declared
    from artifacts_app.tool import definition

    n = args.n
    run_id = secrets.token_hex(3)
    tagged = Agent.objects.create(
        slug=f"tag-{run_id}", module="agent_site.agents.reviewer", max_artifacts=10**9
    )
    tooled = Agent.objects.create(
        slug=f"tool-{run_id}", module="agent_site.agents.reviewer", max_artifacts=10**9
    )
    spec = spec_for_declared("reviewer", "agent_site.agents.reviewer")

    def tag(i: int) -> None:
        services.artifact_tag(
            agent=tagged,
            kind="reviewed-pr",
            source="model",
            data={"url": f"https://x/pull/{i}"},
            title=f"PR {i}",
        )

    def run(i: int) -> None:
        services.tool_run(
            agent=tooled,
            input={
                "artifact": {
                    "kind": "reviewed-pr",
                    "key": None,
                    "title": f"PR {i}",
                    "data": {"url": f"https://x/pull/{i}", "verdict": None},
                }
            },
        )

    def fresh(i: int) -> None:
        definition._cache.clear()
        definition.tool_definition(spec, "openai")

    def cached(i: int) -> None:
        definition.tool_definition(spec, "openai")

    tags, runs = rate(tag, n), rate(run, n)
    fresh_rate, cached_rate = rate(fresh, n), rate(cached, n)
    print(f"database: {connection.vendor}, n={n}")
    print(f"  artifact_tag (baseline)      {tags:8.0f} /s")
    print(f"  tool_run                     {runs:8.0f} /s   baseline/this = {tags / runs:4.2f}x")
    print(f"  tool_definition, uncached    {fresh_rate:8.0f} /s  ({1e6 / fresh_rate:.0f} µs)")
    print(f"  tool_definition, cached      {cached_rate:8.0f} /s  ({1e6 / cached_rate:.0f} µs)")


if __name__ == "__main__":
    main()
