"""Resumable uploads (tus) against our raw PUT and MLflow's ``log_artifact``, in the same rounds.

    .venv/bin/python bench/uploads.py [--rounds 3] [--blob-mib 256] [--chunk-mib 64]

One daphne of the site (bench/peers.py's ``_Ours``: its own SQLite data dir, local storage) and
MLflow's tracking server with proxied artifacts (bench/peers.py's, from ``.venv-bench``). Each
round, with the page cache written out before each upload:

- ``put``: the file as the raw body of ``PUT artifacts/<id>/content`` (one request, streamed);
- ``tus``: tuspy, unchanged, in ``--chunk-mib`` PATCHes, then the tag that uses the upload
  (``"upload": id``) — the same end state as the PUT, a record pointing at the blob;
- ``mlflow``: ``MlflowClient.log_artifact`` of the same file;
- the daphne's peak-RSS growth during ``put`` and ``tus`` (``/proc``'s VmHWM, reset before);
- ``resume``: tuspy up to the chunk boundary below 60 %, a PATCH of the next chunk cut at 60 %
  (its connection closed mid-body), then tuspy again from the offset the server reports: the
  bytes sent twice (at most one chunk);
- ``known``: the re-tag of the same contents by ``contentsSha256``/``contentsSize`` (no bytes),
  median of 20, in ms.

The table shows each case's median round, and the ratios of medians tus/put and tus/mlflow.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.peers import (  # noqa: E402
    MiB,
    _Ours,
    _start_mlflow,
    ensure_bench_venv,
    flush_writes,
    loadavg,
    peak_rss,
    reset_peak,
    wait_until_quiet,
)
from tests.servers import HOST  # noqa: E402

TUS = {"Tus-Resumable": "1.0.0"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--blob-mib", type=int, default=256)
    parser.add_argument("--chunk-mib", type=int, default=64)
    parser.add_argument("--no-mlflow", action="store_true", help="leave MLflow out")
    args = parser.parse_args()

    import httpx

    work = Path(tempfile.mkdtemp(prefix="uploads-bench-"))
    started: list = []
    try:
        run(args, work, started, httpx)
    finally:
        for thing in reversed(started):
            (thing.stop if hasattr(thing, "stop") else thing.close)()
        shutil.rmtree(work, ignore_errors=True)


def run(args, work: Path, started: list, httpx) -> None:
    import os

    from tusclient import client as tus_client

    load_before = loadavg()
    base_env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env = {
        **base_env,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "bench-" + "x" * 40,
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
        "ARTIFACTS_MAX_CONTENT_BYTES": str((args.blob_mib + 16) * MiB),
    }
    ours = _Ours(ROOT, work / "ours", env, SimpleNamespace(cases={"upload"}), started)
    ml = None
    if not args.no_mlflow:
        ensure_bench_venv()
        ml = _start_mlflow(work, base_env, started, httpx)
    daphne = ours.daphne
    pid = daphne.process.pid
    client = httpx.Client(
        base_url=daphne.base_url, headers={"Authorization": f"Bearer {ours.key}"}, timeout=600
    )
    blob = work / "blob.bin"
    with open(blob, "wb") as fh:
        for _ in range(args.blob_mib):
            fh.write(os.urandom(MiB))
    size = blob.stat().st_size
    sha = hashlib.sha256(blob.read_bytes()).hexdigest()
    chunk = args.chunk_mib * MiB
    record = client.post("/tagger/v1/artifacts", json={"kind": "note", "key": "put", "data": {}})
    record_id = record.json()["id"]
    tus = tus_client.TusClient(
        f"{daphne.base_url}/tagger/v1/uploads", headers={"Authorization": f"Bearer {ours.key}"}
    )
    seq = [0]

    def timed(send) -> tuple[float, float]:
        flush_writes()
        before = reset_peak(pid)
        t0 = time.perf_counter()
        send()
        elapsed = time.perf_counter() - t0
        return size / elapsed / 1e6, (peak_rss(pid) - before) / MiB

    def put() -> None:
        with open(blob, "rb") as fh:
            response = client.put(
                f"/tagger/v1/artifacts/{record_id}/content",
                content=fh,
                headers={"Content-Type": "application/octet-stream"},
            )
        assert response.status_code == 200, response.text

    def tus_upload() -> None:
        with open(blob, "rb") as fh:
            uploader = tus.uploader(file_stream=fh, chunk_size=chunk)
            uploader.upload()
        seq[0] += 1
        tagged = client.post(
            "/tagger/v1/artifacts",
            json={
                "kind": "note",
                "key": f"tus-{seq[0]}",
                "data": {},
                "upload": uploader.url.rsplit("/", 1)[1],
            },
        )
        assert tagged.status_code == 201, tagged.text
        assert tagged.json()["content"]["sha256"] == sha

    def resume() -> float:
        """MiB sent twice after a PATCH cut at 60 %."""
        data = blob.read_bytes()
        uploader = tus.uploader(file_stream=io.BytesIO(data), chunk_size=chunk)
        cut = int(size * 0.6)
        boundary = cut // chunk * chunk
        if boundary:
            uploader.upload(stop_at=boundary)
        url = uploader.url
        path = url.split(str(daphne.port), 1)[1]
        length = min(chunk, size - boundary)
        sock = socket.create_connection((HOST, daphne.port))
        sock.sendall(
            (
                f"PATCH {path} HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {ours.key}\r\n"
                f"Tus-Resumable: 1.0.0\r\nUpload-Offset: {boundary}\r\n"
                "Content-Type: application/offset+octet-stream\r\n"
                f"Content-Length: {length}\r\n\r\n"
            ).encode()
            + data[boundary:cut]
        )
        time.sleep(0.5)
        sock.close()
        kept = boundary
        for _ in range(200):  # until the cut PATCH has ended (its lease released)
            probe = client.patch(
                url,
                content=b"",
                headers={
                    **TUS,
                    "Upload-Offset": client.head(url, headers=TUS).headers["Upload-Offset"],
                    "Content-Type": "application/offset+octet-stream",
                },
            )
            if probe.status_code == 204:
                kept = int(probe.headers["Upload-Offset"])
                break
            time.sleep(0.05)
        again = tus.uploader(file_stream=io.BytesIO(data), url=url, chunk_size=chunk)
        again.upload()
        return (cut - kept) / MiB

    def known() -> float:
        times = []
        for _ in range(20):
            seq[0] += 1
            t0 = time.perf_counter()
            response = client.post(
                "/tagger/v1/artifacts",
                json={
                    "kind": "note",
                    "key": f"known-{seq[0]}",
                    "data": {},
                    "contentsSha256": sha,
                    "contentsSize": size,
                },
            )
            times.append((time.perf_counter() - t0) * 1000)
            assert response.status_code == 201, response.text
        return statistics.median(times)

    cases = {"put": lambda: timed(put), "tus": lambda: timed(tus_upload)}
    if ml is not None:
        cases["mlflow"] = lambda: flush_writes() or ml("log_artifact", path=str(blob))
    cases["resume"] = resume
    cases["known"] = known
    print(f"quiet after {wait_until_quiet():.0f} s of waiting", flush=True)
    results: dict[str, list] = {}
    for r in range(args.rounds):
        for name, case in cases.items():
            results.setdefault(name, []).append(case())
        print(f"round {r + 1}/{args.rounds} done (load {loadavg()})", flush=True)
    report(results, args, load_before, loadavg())


def report(results: dict[str, list], args, load_before: str, load_after: str) -> None:
    def med(name: str, index: int | None = None) -> float:
        values = results[name]
        return statistics.median(v[index] if index is not None else v for v in values)

    put, tus = med("put", 0), med("tus", 0)
    print(
        f"\n{args.blob_mib} MiB, tus in {args.chunk_mib} MiB chunks, {args.rounds} rounds "
        f"(load {load_before} → {load_after}); medians:"
    )
    print("| case | MB/s | server peak RSS growth |")
    print("|---|---|---|")
    print(f"| raw `PUT …/content` | {put:.0f} | {med('put', 1):.1f} MiB |")
    print(f"| tuspy, then the tag | {tus:.0f} | {med('tus', 1):.1f} MiB |")
    if "mlflow" in results:
        print(f"| MLflow `log_artifact` | {med('mlflow'):.0f} | |")
    print(f"\ntus / raw PUT: {tus / put:.2f} (target ≥ 0.8)")
    if "mlflow" in results:
        print(f"tus / MLflow log_artifact: {tus / med('mlflow'):.2f} (target ≥ 1)")
    print(f"resumed after a PATCH cut at 60 %: {med('resume'):.1f} MiB sent twice (≤ one chunk)")
    print(f"known-contents re-tag: {med('known'):.1f} ms (target < 50)")


if __name__ == "__main__":
    main()
