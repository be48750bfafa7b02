"""In-process tags with WAL checkpoints on the checkpointer's thread beside the same tags with
SQLite's own (inside the commit that passes ``wal_autocheckpoint``), same process, same database.

    .venv/bin/python bench/checkpoints.py [--n 20000] [--rounds 4]

The two modes run interleaved in rounds (``n/rounds`` tags each per round, through
``artifacts(slug).tag``); "off" only stops telling the checkpointer of commits
(``agent_site/sqlite/checkpoint.py``), so the commits of that mode checkpoint as SQLite does by
itself. Printed per mode: tags/s and the latency percentiles over all its tags, and on/off ratios.
SQLite only (the embedded default): PostgreSQL has no WAL of this kind.
"""

from __future__ import annotations

import argparse
import time

from _setup import django_setup


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20000, help="tags per mode, over all rounds")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    django_setup()

    from django.db import connection, connections

    from artifacts_app import artifacts, services

    if connection.vendor != "sqlite":
        raise SystemExit("bench/checkpoints.py measures SQLite's WAL: unset DATABASE_URL.")
    services.agent_create(slug="tagger", max_artifacts=10**9)
    api = artifacts("tagger")
    for i in range(500):  # warm-up (and the connection, with its checkpointer)
        api.tag(kind="note", key=f"warm-{i}", data={"i": i})
    wrapper = connections["default"]  # the site's backend (agent_site/sqlite)
    checkpointer = wrapper._checkpointer
    latencies: dict[str, list[float]] = {"on": [], "off": []}
    elapsed = {"on": 0.0, "off": 0.0}
    per_round = args.n // args.rounds
    seq = 0
    for _ in range(args.rounds):
        for mode in ("off", "on"):
            wrapper._checkpointer = checkpointer if mode == "on" else None
            start = time.perf_counter()
            for _ in range(per_round):
                seq += 1
                t0 = time.perf_counter()
                api.tag(kind="note", key=f"k-{seq}", data={"n": seq, "text": "x" * 64})
                latencies[mode].append(time.perf_counter() - t0)
            elapsed[mode] += time.perf_counter() - start
    wrapper._checkpointer = checkpointer

    def pct(values: list[float], p: float) -> float:
        return values[min(len(values) - 1, int(len(values) * p))] * 1000

    print(f"{args.n:,} tags per mode in {args.rounds} interleaved rounds (SQLite, WAL)")
    print("| mode | tags/s | p50 ms | p99 ms | p99.9 ms | max ms | tags over 10 ms |")
    print("|---|---|---|---|---|---|---|")
    figures = {}
    for mode in ("off", "on"):
        values = sorted(latencies[mode])
        figures[mode] = (len(values) / elapsed[mode], pct(values, 0.999), values[-1] * 1000)
        print(
            f"| {'thread' if mode == 'on' else 'in the commit'} | {figures[mode][0]:,.0f} | "
            f"{pct(values, 0.5):.3f} | {pct(values, 0.99):.3f} | {figures[mode][1]:.2f} | "
            f"{figures[mode][2]:.1f} | {sum(v > 0.01 for v in values)} |"
        )
    on, off = figures["on"], figures["off"]
    print(
        f"thread / in the commit: {on[0] / off[0]:.2f}× the rate, p99.9 {on[1] / off[1]:.2f}×, "
        f"max {on[2] / off[2]:.2f}×; checkpoints run by the thread: {checkpointer.checkpoints}"
    )


if __name__ == "__main__":
    main()
