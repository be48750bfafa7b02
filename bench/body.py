"""The body road on daphne, two trees side by side in interleaved rounds: uploads, a download and
the tag beside a hello, each with the server's peak-RSS growth.

    .venv/bin/python bench/body.py [--rounds 5] [--blob-mib 64] [--requests 200] [--before TREE]
        [--only multipart,put,download,tag,hello]

``bench/peers.py``'s upload group without MLflow (its ``.venv-bench`` is not needed): one daphne
per tree (``bench/rest_asgi.py``, DEBUG off, SQLite in a temp dir), and per round, per tree:

- a ``--blob-mib`` multipart ``POST artifacts`` and a raw ``PUT …/content`` (the request body
  streamed from the socket into the blob, with flow control on reading);
- a ``GET …/content`` of that blob (the response paced by the send buffer);
- ``--requests`` sequential JSON tags and as many Django JSON hellos (what every request pays for
  the body road's wiring).

Each case runs in each tree in turn, the trees' order reversed every other round. Medians of the
rounds (MB/s and MiB of peak-RSS growth; requests/s), then after / before.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CASES = ("multipart", "put", "download", "tag", "hello")

from bench.peers import (  # noqa: E402
    MiB,
    _Ours,
    flush_writes,
    http_rate,
    loadavg,
    peak_rss,
    reset_peak,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--blob-mib", type=int, default=64)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--before", type=Path, help="an earlier tree, measured in the same rounds")
    parser.add_argument(
        "--only",
        default=",".join(CASES),
        help=f"the cases to run, comma-separated (default: all of {', '.join(CASES)})",
    )
    args = parser.parse_args()
    args.only = [case for case in CASES if case in args.only.split(",")]
    args.cases = {"upload", "http"}  # what _Ours reads

    import os

    import httpx

    work = Path(tempfile.mkdtemp(prefix="bench-body-"))
    started: list = []
    env = {
        **{k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}},
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "bench-" + "x" * 40,
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
        "ARTIFACTS_MAX_CONTENT_BYTES": str((args.blob_mib + 16) * MiB),
    }
    load_before = loadavg()
    try:
        trees = {"now": ROOT}
        if args.before is not None:
            trees = {"before": args.before.resolve(), **trees}
        blob = work / "blob.bin"
        with open(blob, "wb") as fh:
            for _ in range(args.blob_mib):
                fh.write(os.urandom(MiB))
        cases: dict[str, object] = {}
        for name, tree in trees.items():
            ours = _Ours(tree, work / name, env, args, started)
            cases.update(_cases(name, ours, args, blob, httpx))
        results: dict[str, list] = {}
        # Every case of a round in each tree in turn, the trees' order reversed every other round
        # (what runs second in a round meets the page cache and the machine the first left).
        order = [f"{tree}:{case}" for case in args.only for tree in trees]
        for r in range(args.rounds):
            for name in order if r % 2 == 0 else order[::-1]:
                results.setdefault(name, []).append(cases[name]())  # type: ignore[operator]
            print(f"round {r + 1}/{args.rounds} (load {loadavg()})", flush=True)
        _report(results, trees, args, load_before)
    finally:
        for thing in reversed(started):
            (thing.stop if hasattr(thing, "stop") else thing.close)()
        shutil.rmtree(work, ignore_errors=True)


def _cases(tree: str, ours: _Ours, args, blob: Path, httpx) -> dict:
    daphne = ours.daphne
    pid = daphne.process.pid
    size = blob.stat().st_size
    client = httpx.Client(
        base_url=daphne.base_url, headers={"Authorization": f"Bearer {ours.key}"}, timeout=300
    )
    record = client.post("/tagger/v1/artifacts", json={"kind": "note", "key": "upload", "data": {}})
    upload_id = record.json()["id"]
    seq = [0]

    def tag_body(i: int) -> dict:
        seq[0] += 1
        return {"kind": "note", "key": f"k-{seq[0]}", "data": {"n": seq[0], "text": "x" * 64}}

    def upload(send) -> tuple[float, float]:
        flush_writes()
        before = reset_peak(pid)
        with open(blob, "rb") as fh:
            t0 = time.perf_counter()
            response = send(fh)
            elapsed = time.perf_counter() - t0
        assert response.status_code in (200, 201), response.text
        return size / elapsed / 1e6, (peak_rss(pid) - before) / MiB

    def multipart(fh):
        return client.post(
            "/tagger/v1/artifacts",
            files={
                "record": (None, b'{"kind": "note", "key": "upload", "data": {}}'),
                "contents": ("blob.bin", fh, "application/octet-stream"),
            },
        )

    def put(fh):
        return client.put(
            f"/tagger/v1/artifacts/{upload_id}/content",
            content=fh,
            headers={"Content-Type": "application/octet-stream"},
        )

    def download() -> tuple[float, float]:
        before = reset_peak(pid)
        got = 0
        t0 = time.perf_counter()
        with client.stream("GET", f"/tagger/v1/artifacts/{upload_id}/content") as response:
            assert response.status_code == 200, response.status_code
            for chunk in response.iter_raw(MiB):
                got += len(chunk)
        elapsed = time.perf_counter() - t0
        assert got == size, got
        return size / elapsed / 1e6, (peak_rss(pid) - before) / MiB

    upload(put)  # the blob the download reads; warms the path
    http_rate(client, "POST", "/tagger/v1/artifacts", 20, json=tag_body)
    http_rate(client, "GET", "/bare/django-hello", 20)
    return {
        f"{tree}:multipart": lambda: upload(multipart),
        f"{tree}:put": lambda: upload(put),
        f"{tree}:download": download,
        f"{tree}:tag": lambda: http_rate(
            client, "POST", "/tagger/v1/artifacts", args.requests, json=tag_body
        ),
        f"{tree}:hello": lambda: http_rate(client, "GET", "/bare/django-hello", args.requests),
    }


def _report(results: dict[str, list], trees: dict, args, load_before: str) -> None:
    def med(name: str, index: int) -> float:
        return statistics.median(v[index] for v in results[name])

    print(
        f"\n{args.blob_mib} MiB blob, {args.requests} requests, medians of {args.rounds} rounds; "
        f"load {load_before} -> {loadavg()}"
    )
    header = "case".ljust(22) + "".join(t.rjust(26) for t in trees)
    print(header + ("   now / before" if len(trees) == 2 else ""))

    def row(case: str, cell) -> None:
        """One case: its medians per tree (``cell`` formats a tree's), now / before, the rounds."""
        cells = [cell(f"{t}:{case}") for t in trees]
        ratio = (
            f"   {med(f'now:{case}', 0) / med(f'before:{case}', 0):.2f}x" if len(trees) == 2 else ""
        )
        print(case.ljust(22) + "".join(c.rjust(26) for c in cells) + ratio)
        for t in trees:
            rounds = ", ".join(f"{v[0]:.0f}" for v in results[f"{t}:{case}"])
            print(f"  {t}, per round: {rounds}")

    for case in [c for c in ("multipart", "put", "download") if c in args.only]:
        row(case, lambda name: f"{med(name, 0):7.0f} MB/s, +{med(name, 1):5.1f} MiB")
    for case in [c for c in ("tag", "hello") if c in args.only]:
        row(case, lambda name: f"{med(name, 0):7.0f} req/s")
    for t in trees if {"tag", "hello"} <= set(args.only) else ():
        print(f"{t}: tag / hello {med(f'{t}:tag', 0) / med(f'{t}:hello', 0):.2f}x")


if __name__ == "__main__":
    main()
