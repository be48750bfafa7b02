"""Kinds' JSON Schemas: the engine chosen for their regular expressions, and what the bounds cost.

    .venv/bin/python bench/schemas.py [--rounds 5] [--before /path/to/an/earlier/checkout]

jsonschema-rs is measured only when installed (``pip install jsonschema-rs``: it is not one of
the project's dependencies; it was the alternative to RE2). Cases, each the median of the rounds:

1. the exponential pattern ``^(a+)+$`` on ``"a" * n + "!"``: Python's ``re`` (what jsonschema ran
   before, n <= 22 only), ours (jsonschema + RE2), jsonschema-rs with its linear ``regex`` engine;
2. a typical kind (a dozen fields, two patterns, an array of objects): validations per second for
   jsonschema alone (before), ours with the budget, and jsonschema-rs;
3. ``$ref`` fan-out at depth 12/14/16 (data failing every ``anyOf`` branch) on jsonschema-rs: the
   fan-out is exponential in any engine, so the bound at PUT is needed whichever validates;
4. whether a long match holds the GIL: how far a Python thread counts during one RE2 search
   (and one jsonschema-rs validation) of a 20 MB string, against counting alone;
5. RE2's worst case per byte and instruction (a pattern whose DFA thrashes), the figure behind
   ``STEPS_PER_MS``; and the budget's overshoot: how long a tag past 200 ms really runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from jsonschema import Draft202012Validator  # noqa: E402
from jsonschema.validators import extend  # noqa: E402

from artifacts_app import jsonschemas  # noqa: E402

try:
    import jsonschema_rs
except ImportError:  # the alternative, measured when installed
    jsonschema_rs = None


def _median(fn, rounds: int, n: int = 1, clock=time.perf_counter) -> float:
    times = []
    for _ in range(rounds):
        start = clock()
        for _ in range(n):
            fn()
        times.append((clock() - start) / n)
    return statistics.median(times)


def _rs(schema: dict[str, Any]) -> Any:
    return jsonschema_rs.validator_for(schema, pattern_options=jsonschema_rs.RegexOptions())


def exponential(rounds: int) -> None:
    print("\n1. ^(a+)+$ on 'a' * n + '!' (ms per validation)")
    schema = {"type": "string", "pattern": "^(a+)+$"}
    ours = jsonschemas.CompiledSchema(schema)
    rs = _rs(schema) if jsonschema_rs else None
    print(f"{'n':>6} {'Python re':>12} {'RE2 (ours)':>12} {'jsonschema-rs':>14}")
    for n in (16, 20, 22, 40, 10_000, 1_000_000):
        text = "a" * n + "!"
        py = (
            f"{_median(lambda t=text: re.search('^(a+)+$', t), 1) * 1000:12.2f}"
            if n <= 22
            else f"{'(hours)':>12}"
        )
        try:
            mine = _median(lambda t=text: ours.parse(t, 200), rounds) * 1000
        except jsonschemas.TooCostly:
            mine = float("inf")  # its worst case passes the budget: not started
        other = _median(lambda t=text: rs.is_valid(t), rounds) * 1000 if rs else float("nan")
        print(f"{n:>6} {py} {mine:12.3f} {other:14.3f}")


TYPICAL_SCHEMA = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "pattern": "^https://[^\\s]+$"},
        "verdict": {"enum": ["approve", "comment", "reject"], "default": "comment"},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "files": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "pattern": "^[\\w./-]+$"},
                    "lines": {"type": "integer", "minimum": 0},
                },
                "required": ["path"],
            },
        },
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "summary": {"type": "string", "maxLength": 2000},
    },
    "required": ["url"],
}
TYPICAL_DATA = {
    "url": "https://github.com/o/r/pull/7",
    "verdict": "approve",
    "score": 0.93,
    "files": [{"path": f"src/m{i}.py", "lines": i} for i in range(10)],
    "labels": {"area": "core", "risk": "low"},
    "summary": "Looks good; one question about the retry loop.",
}


def _before(tree: str) -> Any:
    """``artifacts_app/jsonschemas.py`` of another source tree (an earlier commit's checkout)."""
    spec = importlib.util.spec_from_file_location(
        "jsonschemas_before", Path(tree) / "artifacts_app" / "jsonschemas.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def typical(rounds: int, before_tree: str | None) -> None:
    print("\n2. a typical kind, validations per CPU second (cases interleaved, median of rounds)")
    library = Draft202012Validator(TYPICAL_SCHEMA)
    ours = jsonschemas.CompiledSchema(TYPICAL_SCHEMA)
    unmetered = extend(Draft202012Validator, validators=jsonschemas._OWN)(
        TYPICAL_SCHEMA, registry=ours.registry
    )
    rows = [("jsonschema alone, Python re", lambda: list(library.iter_errors(TYPICAL_DATA)))]
    if before_tree:
        old = _before(before_tree).CompiledSchema(TYPICAL_SCHEMA)
        rows.append(("CompiledSchema.parse before", lambda: old.parse(TYPICAL_DATA)))
    rows += [
        ("CompiledSchema.parse now (RE2, budget)", lambda: ours.parse(TYPICAL_DATA, 200)),
        ("RE2 keywords, no budget", lambda: list(unmetered.iter_errors(TYPICAL_DATA))),
    ]
    if jsonschema_rs:
        rs = _rs(TYPICAL_SCHEMA)
        rows.append(("jsonschema-rs (RegexOptions)", lambda: list(rs.iter_errors(TYPICAL_DATA))))
    times: dict[str, list[float]] = {name: [] for name, _ in rows}
    for _ in range(rounds):
        for name, fn in rows:
            times[name].append(_median(fn, 1, 500, clock=time.thread_time))  # CPU: less noise
    base = statistics.median(times[rows[0][0]])
    for name, _ in rows:
        per = statistics.median(times[name])
        print(f"  {name:40} {1 / per:10,.0f}/s  {per * 1e6:8.1f} µs  {per / base:5.2f}x")


def fan_out_rs(rounds: int) -> None:
    if not jsonschema_rs:
        return
    print("\n3. anyOf fan-out through $ref on jsonschema-rs (data fails every branch)")
    for depth in (12, 14, 16):
        defs: dict[str, Any] = {
            f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
            for i in range(depth)
        }
        defs[f"d{depth}"] = {"type": "integer"}
        rs = _rs({"$defs": defs, "$ref": "#/$defs/d0"})
        print(f"  depth {depth}: {_median(lambda v=rs: v.is_valid('x'), 1) * 1000:9.1f} ms")


def gil(rounds: int) -> None:
    print("\n4. does a long match hold the GIL? (counts of a Python thread, 20 MB string)")
    text = "a" * 20_000_000 + "!"
    rs = _rs({"type": "string", "pattern": "^(a+)+$"}) if jsonschema_rs else None

    def counted(fn) -> tuple[float, int]:
        count = [0]
        stop = threading.Event()

        def spin() -> None:
            while not stop.is_set():
                count[0] += 1

        thread = threading.Thread(target=spin)
        thread.start()
        time.sleep(0.05)
        before = count[0]
        start = time.perf_counter()
        fn()
        took = time.perf_counter() - start
        got = count[0] - before
        stop.set()
        thread.join()
        return took, got

    alone, spun = counted(lambda: time.sleep(0.2))
    print(f"  counting alone: {spun / alone:,.0f} counts/s")
    took, got = counted(lambda: jsonschemas.search("^(a+)+$", text))  # the Set, then the regexp
    print(f"  during our RE2 search: {took * 1000:.0f} ms, {got / took:,.0f} counts/s")
    if rs:
        took, got = counted(lambda: rs.is_valid(text))
        print(f"  during jsonschema-rs: {took * 1000:.0f} ms, {got / took:,.0f} counts/s")


def worst_case(rounds: int) -> None:
    print("\n5a. RE2's worst case: (a|b)*a(a|b){k}c on 100,000 random a/b (DFA thrashes)")
    import random

    rng = random.Random(1)
    text = "".join(rng.choice("ab") for _ in range(100_000))
    for k in (10, 20, 100, 500):
        compiled = jsonschemas.regex(f"(a|b)*a(a|b){{{k}}}c")
        took = _median(lambda c=compiled: c.search(text), 1)
        per = took * 1e9 / len(text) / compiled.programsize
        print(
            f"  k={k:<4} {compiled.programsize:6} instructions {took * 1000:8.1f} ms  {per:5.1f} ns/byte/instruction"
        )
    print("\n5b. the budget's overshoot: a tag past 200 ms (anyOf fan-out, 50,000 items)")
    defs: dict[str, Any] = {
        f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(7)
    }
    defs["d7"] = {"type": "integer"}
    costly = jsonschemas.CompiledSchema(
        {"type": "array", "items": {"$ref": "#/$defs/d0"}, "$defs": defs}
    )
    spent = []
    for _ in range(rounds):
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            costly.parse(["x"] * 50_000, 200)
        except jsonschemas.TooCostly:
            spent.append(((time.perf_counter() - start) * 1000, (time.thread_time() - cpu) * 1000))
    print(
        f"  refused after {statistics.median(w for w, _ in spent):.1f} ms wall, "
        f"{statistics.median(c for _, c in spent):.1f} ms CPU (median), "
        f"max {max(c for _, c in spent):.1f} ms CPU"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", help="a source tree whose jsonschemas.py to compare (case 2)")
    args = parser.parse_args()
    exponential(args.rounds)
    typical(args.rounds, args.before)
    for case in (fan_out_rs, gil, worst_case):
        case(args.rounds)


if __name__ == "__main__":
    main()
