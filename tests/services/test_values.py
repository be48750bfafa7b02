"""values.py's fast filters agree with the exact walk (the one check of what both databases hold)."""

from __future__ import annotations

import random

import orjson
import pytest

from artifacts_app import values


def _depth(x: object) -> int:
    if isinstance(x, dict):
        return 1 + max((_depth(c) for c in x.values()), default=0)
    if isinstance(x, list):
        return 1 + max((_depth(c) for c in x), default=0)
    return 0


def _document(rng: random.Random, depth: int) -> object:
    r = rng.random()
    if depth > 0 and r < 0.4:
        return [_document(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    if depth > 0 and r < 0.8:
        return {
            rng.choice(["a", "[[", '"}', "\\", ""]) + str(i): _document(rng, depth - 1)
            for i in range(rng.randint(0, 3))
        }
    return rng.choice(["x[", "]]}", '\\"', 1, None, "", '""', "e+20", "1234567890123456789012"])


def test_the_bytes_depth_filter_agrees_with_a_python_depth():
    rng = random.Random(13)
    for _ in range(2000):
        document = _document(rng, rng.randint(0, 8))
        raw = orjson.dumps(document)
        for limit in range(9):
            assert values._depth_ok_bytes(raw, limit) == (_depth(document) <= limit), raw


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (2**63 - 1, True),
        (-(2**63), True),
        (2**63, False),
        (9.2e18, True),
        (9.3e18, False),
        (1e300, False),
        (float("nan"), False),
        (float("-inf"), False),
        ({"s": "1e+99 and 12345678901234567890123"}, True),  # a number's look-alike inside text
        ({"s": "\\u0000 as six characters"}, True),
        ({"s": "\x00"}, False),
        ({"k\ud800": 1}, False),
        ({1: 1}, False),
        ([None, True, False, "", 0, -0.0], True),
    ],
)
def test_fast_path_and_exact_walk_agree(value, ok):
    assert (values.value_problem(value) is None) == ok
    assert (values._first_problem(value, "data", values.MAX_DEPTH) is None) == ok
