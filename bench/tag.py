"""Tags per second of services.artifact_tag beside a plain insert on the same database, same run.

    .venv/bin/python bench/tag.py [--n 2000] [--rounds 5]

Cases: plain tag below the cap, with 4 KiB contents, a re-tag of a key, at the cap (every tag evicts
one record), and through the Python API (`artifacts(slug, session_id=…).tag`, which names its agent
and session by string on every call, as agents' host code does), each against the baseline
`Artifact.objects.create` inside `transaction.atomic()`. The cases run interleaved in rounds; each
shows its median round. The database is the one the settings choose (SQLite in a temporary data
dir unless DATABASE_URL says otherwise).
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics

from _setup import django_setup, rate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000, help="tags per case, over all rounds")
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="the cases run interleaved, n/rounds tags each per round; the median round is shown",
    )
    args = parser.parse_args()
    django_setup()

    from django.db import connection, transaction

    from artifacts_app import artifacts, services
    from artifacts_app.models import Agent, Artifact

    n = args.n
    run_id = secrets.token_hex(3)
    base_agent = services.agent_create(slug=f"base-{run_id}", max_artifacts=10**9)
    below = services.agent_create(slug=f"below-{run_id}", max_artifacts=10**9)
    blobby = services.agent_create(slug=f"blob-{run_id}", max_artifacts=10**9)
    keyed = services.agent_create(slug=f"keyed-{run_id}", max_artifacts=10**9)
    at_cap = services.agent_create(slug=f"cap-{run_id}", max_artifacts=n)
    by_slug = services.agent_create(slug=f"api-{run_id}", max_artifacts=10**9)
    services.session_create(agent=by_slug, sid="s_bench")
    api = artifacts(by_slug.slug, session_id="s_bench", turn_id="t-1")
    # Fill the capped agent to its cap so every measured tag evicts one record.
    for i in range(n):
        services.artifact_tag(agent=at_cap, kind="note", data={"fill": i})
    payloads = [os.urandom(4096) for _ in range(n + 1)]

    def baseline(i: int) -> None:
        with transaction.atomic():
            Artifact.objects.create(
                id=f"b{run_id}{i}", agent=base_agent, kind="note", data={"i": i}
            )

    def tag_below(i: int) -> None:
        services.artifact_tag(agent=below, kind="note", data={"i": i})

    def tag_blob(i: int) -> None:
        services.artifact_tag(agent=blobby, kind="note", data={"i": i}, contents=payloads[i])

    def tag_keyed(i: int) -> None:
        # 50 keys re-tagged in turn: the upsert path (a lookup, then an UPDATE).
        services.artifact_tag(agent=keyed, kind="note", key=f"k{i % 50}", data={"i": i})

    def tag_cap(i: int) -> None:
        services.artifact_tag(agent=at_cap, kind="note", data={"i": i})

    def tag_api(i: int) -> None:
        api.tag(kind="note", data={"i": i})

    cases = {
        "baseline create": baseline,
        "tag, below cap": tag_below,
        "tag + 4 KiB contents": tag_blob,
        "re-tag of a key": tag_keyed,
        "tag, at cap (evicts 1)": tag_cap,
        "Python API, slug + session": tag_api,
    }
    # Interleaved rounds: a slow spell of the machine (a disk flush, another process) hits every
    # case of a round alike instead of one case's whole run; each case reports its median round.
    per = n // args.rounds
    rounds: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(args.rounds):
        for name, fn in cases.items():
            # Indexes stay unique across rounds (the baseline's ids, the payloads); warm-ups negative.
            rounds[name].append(
                rate(lambda i, fn=fn, r=r: fn(r * per + i if i >= 0 else -1 - r), per)
            )
    results = {name: statistics.median(values) for name, values in rounds.items()}
    assert Agent.objects.get(pk=at_cap.pk).artifact_count == n
    print(
        f"database: {connection.vendor}, n={n}, {args.rounds} interleaved rounds of {per}, median round"
    )
    base = results["baseline create"]
    for name, value in results.items():
        print(f"  {name:<26} {value:8.0f} /s   baseline/this = {base / value:4.2f}x")
    print(
        f"  at-cap vs below-cap: {results['tag, below cap'] / results['tag, at cap (evicts 1)']:.2f}x slower"
        "  (target <= 1.2x)"
    )
    print(
        f"  plain tag vs baseline: {base / results['tag, below cap']:.2f}x slower  (target <= 3x)"
    )


if __name__ == "__main__":
    main()
