"""CPU time per tag (this process's, ``time.process_time``) of services.artifact_tag.

    .venv/bin/python bench/tag_cpu.py [--n 300]

bench/tag.py's rates are wall-clock: on a loaded machine (other test suites, a disk that
flushes) they swing 2-4x between runs of the same code. The CPU time a tag spends in this process
moves far less with the load, so a change to the tag's Python (how its statements are built and
their parameters picked) is compared here: run it on the tree before and after, alternating,
and compare medians. Cases: a new record, a re-tag of a key with a full history (10 versions: its
oldest version recycled), a tag at the cap (evicts one). Each case runs 5 interleaved rounds of
``--n`` tags and shows its median round.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import time

from _setup import django_setup


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300, help="tags per case per round")
    args = parser.parse_args()
    django_setup()

    from artifacts_app import services

    run_id = secrets.token_hex(3)
    below = services.agent_create(slug=f"b-{run_id}", max_artifacts=10**9)
    keyed = services.agent_create(slug=f"k-{run_id}", max_artifacts=10**9, keep_versions=10)
    cap = services.agent_create(slug=f"c-{run_id}", max_artifacts=300)
    for i in range(300):
        services.artifact_tag(agent=cap, kind="note", data={"i": i})
    for i in range(500):  # 50 keys, 10 versions each
        services.artifact_tag(agent=keyed, kind="note", key=f"k{i % 50}", data={"i": i})

    def new(i: int) -> None:
        services.artifact_tag(agent=below, kind="note", data={"i": i})

    def retag(i: int) -> None:
        services.artifact_tag(agent=keyed, kind="note", key=f"k{i % 50}", data={"i": i})

    def at_cap(i: int) -> None:
        services.artifact_tag(agent=cap, kind="note", data={"i": i})

    cases = {"new record": new, "re-tag, full history": retag, "at the cap": at_cap}
    rounds: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(5):
        for name, fn in cases.items():
            start = time.process_time()
            for i in range(args.n):
                fn(r * args.n + i)
            rounds[name].append((time.process_time() - start) / args.n * 1e6)
    print(f"CPU µs per tag, median of 5 rounds of {args.n}:")
    for name, values in rounds.items():
        print(f"  {name:<22} {statistics.median(values):6.0f}")


if __name__ == "__main__":
    main()
