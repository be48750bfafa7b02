"""One data set, many searches, on the database the environment names: the records each search
finds, as JSON on stdout. ``tests/services/test_search_compare.py`` runs it on SQLite and on
PostgreSQL and compares the answers (API.md "Search": the same records for the same query).

Run: ``python -m tests.search_compare`` (with ``DATABASE_URL`` or ``ARTIFACTS_DATA_DIR`` set to an
empty database: it migrates it first).
"""

from __future__ import annotations

import json
import os
import random
import sys

VOCABULARY = [
    "alpha", "beta", "gamma", "Straße", "strasse", "İstanbul", "istanbul", "café", "cafe",
    "naïve", "中文", "日本語", "x1", "2024", "v2beta", "ﬁne", "fine", "Ωmega", "ÅNGSTRÖM", "año",
]  # fmt: skip
SCALARS: list[object] = [0, 1, -1, 2.5, 1e18, "a", "b", "B", "ä", "10", "", True, False, None]


def _text(rng: random.Random) -> str:
    separators = [" ", "-", ".", ", ", "\n", "/", "_", "'"]
    return "".join(
        rng.choice(VOCABULARY) + rng.choice(separators) for _ in range(rng.randint(1, 6))
    )


def _data(rng: random.Random, depth: int = 0) -> dict[str, object]:
    data: dict[str, object] = {}
    for name in rng.sample(["a", "b", "c", "tags", "nested"], rng.randint(1, 5)):
        roll = rng.random()
        if name == "tags":
            data[name] = [rng.choice(SCALARS[:11]) for _ in range(rng.randint(0, 3))]
        elif name == "nested" and depth < 2:
            data[name] = _data(rng, depth + 1)
        elif roll < 0.3:
            data[name] = _text(rng)
        else:
            data[name] = rng.choice(SCALARS)
    return data


def queries() -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    for word in VOCABULARY:
        found.append({"q": word})
        found.append({"q": word[:2]})
        found.append({"q": f"-{word}"})
    found += [
        {"q": "alpha beta"},
        {"q": '"alpha beta"'},
        {"q": 'gamma -"alpha beta"'},
        {"q": "STRASSE"},
        {"q": "note x"},
        {"q": "rec1"},
    ]
    for path in ["a", "b", "nested.a", "nested.nested.c"]:
        for value in SCALARS:
            found.append({"where": {path: value}})
            found.append({"where": {path: {"$ne": value}}})
            if value is not None and not isinstance(value, bool):
                for op in ("$gt", "$gte", "$lt", "$lte"):
                    found.append({"where": {path: {op: value}}})
        found.append({"where": {path: {"$exists": True}}})
        found.append({"where": {path: {"$exists": False}}})
        found.append({"where": {path: {"$in": [1, "a", None, True]}}})
        found.append({"where": {path: {"$nin": [1, "a", 2.5]}}})
    for value in SCALARS[:11]:
        found.append({"where": {"tags": {"$contains": value}}})
    found.append({"where": {"$or": [{"a": {"$gt": 0}}, {"b": "a"}], "c": {"$exists": True}}})
    found.append({"q": "alpha", "where": {"a": {"$lte": "b"}}})
    return found


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agent_site.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from artifacts_app import selectors, services

    call_command("migrate", verbosity=0)
    agent = services.agent_create(slug="compare", max_artifacts=10_000)
    rng = random.Random(20261205)
    for i in range(300):
        contents = _text(rng) if rng.random() < 0.2 else None
        services.artifact_tag(
            agent=agent,
            kind="note",
            key=f"rec{i}",
            title=_text(rng) if rng.random() < 0.5 else None,
            data=_data(rng),
            contents=contents,
            content_type="text/plain" if contents else None,
        )
    answers = []
    for query in queries():
        keys = sorted(str(r.key) for r in selectors.artifacts_all(agent=agent, **query))
        answers.append({"query": query, "keys": keys})
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()
