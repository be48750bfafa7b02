"""The door for values against orjson alone, same run: what the one check and the one
parser add to a tag.

    .venv/bin/python bench/values.py [--rounds 7]

Cases: a typical tag's data (a dozen fields), and a 1 MB data (20,000 rows). For each: the check
(`values.check_value`, which also answers the encoding the size check needs) against
`orjson.dumps` (what the tag did before), and the parser (`values.json_loads`) against
`orjson.loads`. Each figure is the median of the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from artifacts_app import values  # noqa: E402


def _per_call(fn, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    small = {
        "url": "https://github.com/o/r/pull/7",
        "verdict": "approve",
        "files": ["a.py", "b.py"],
        "score": 0.93,
        "comments": 4,
        "summary": "Looks good; one question about the retry loop.",
        "labels": {"area": "core", "risk": "low"},
    }
    big = {"rows": [{"id": i, "name": f"row {i}", "vals": [1.5, 2, "x"]} for i in range(20000)]}
    for name, data, n in (("typical data", small, 20000), ("1 MB data", big, 5)):
        raw = orjson.dumps(data)
        rows = {"check_value": [], "orjson.dumps": [], "json_loads": [], "orjson.loads": []}
        for _ in range(args.rounds):
            rows["check_value"].append(_per_call(lambda d=data: values.check_value(d), n))
            rows["orjson.dumps"].append(_per_call(lambda d=data: orjson.dumps(d), n))
            rows["json_loads"].append(_per_call(lambda r=raw: values.json_loads(r), n))
            rows["orjson.loads"].append(_per_call(lambda r=raw: orjson.loads(r), n))
        med = {k: statistics.median(v) for k, v in rows.items()}
        print(
            f"{name} ({len(raw):,} bytes): check_value {med['check_value'] * 1e6:,.1f} µs vs "
            f"orjson.dumps {med['orjson.dumps'] * 1e6:,.1f} µs "
            f"({med['check_value'] / med['orjson.dumps']:.1f}x); json_loads "
            f"{med['json_loads'] * 1e6:,.1f} µs vs orjson.loads {med['orjson.loads'] * 1e6:,.1f} µs "
            f"({med['json_loads'] / med['orjson.loads']:.2f}x)"
        )


if __name__ == "__main__":
    main()
