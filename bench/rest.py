"""The REST API served by a real daphne process, each figure beside its baseline in the same run.

    .venv/bin/python bench/rest.py [--requests 400] [--blob-mib 256] [--rounds 3]

- list: p50/p99 of a 50-row page (GET artifacts?limit=50, agent key) with 1k and with 100k
  records stored (target: 100k within 1.3x of 1k);
- tag: requests/s of POST artifacts (JSON) beside a bare Django JSON view that inserts one row
  (target: within 2x);
- handler: requests/s of a 404, a list page and a tag through ``agent_site.asgi``'s handler beside
  the same routes through Django's stock ``ASGIHandler`` on the same daphne, sequential and with 8
  requests in flight;
- content: MB/s of a blob downloaded from GET artifacts/<id>/content beside the same file from a
  bare ASGI app and from Django's FileResponse on the same daphne, with the server's RSS growth
  during each download (target: >= 60% of bare ASGI, >= FileResponse, RSS growth < 32 MiB).
SQLite in a temporary data dir, DEBUG off; the client is httpx in this process.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MiB = 1024 * 1024


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prepare(env: dict[str, str], blob_mib: int) -> dict[str, str]:
    """Migrate and fill the database in a child process's environment; answers keys and ids."""
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from artifacts_app import services
    from artifacts_app.blobs import blob_name, blob_storage
    from artifacts_app.models import Agent, Artifact

    out: dict[str, str] = {}
    base = datetime(2026, 1, 1, tzinfo=UTC)
    for slug, count in (("a1k", 1_000), ("a100k", 100_000)):
        agent = services.agent_create(slug=slug, max_artifacts=10**9)
        _, out[slug] = services.agent_key_create(agent=agent)
        batch = []
        for i in range(count):
            moment = base + timedelta(seconds=i)
            batch.append(
                Artifact(
                    id=f"art_{slug}_{i:08d}",
                    agent=agent,
                    kind=f"k{i % 5}",
                    data={"i": i},
                    created_at=moment,
                    updated_at=moment,
                )
            )
            if len(batch) == 5000:
                Artifact.objects.bulk_create(batch)
                batch = []
        Artifact.objects.bulk_create(batch)
        Agent.objects.filter(pk=agent.pk).update(artifact_count=count)
    tagger = services.agent_create(slug="tagger", max_artifacts=10**9)
    _, out["tagger"] = services.agent_key_create(agent=tagger)
    services.agent_create(slug="bare", max_artifacts=10**9)
    with tempfile.TemporaryFile() as fh:
        for _ in range(blob_mib):
            fh.write(os.urandom(MiB))
        fh.seek(0)
        record = services.artifact_tag(agent=tagger, kind="blob", data={}, contents=fh).record
    out["blob_id"] = record.id
    out["blob_path"] = blob_storage().path(blob_name(record.content.sha256))
    return out


class RSSPeak:
    """Samples a process's RSS every 10 ms; ``growth`` is the peak minus the RSS at start."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.proc = psutil.Process(pid)
        self.start = self.peak = self.proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.01)

    def __enter__(self) -> RSSPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def growth_mib(self) -> float:
        return (self.peak - self.start) / MiB


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--blob-mib", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    args = parser.parse_args()
    import httpx

    data_dir = tempfile.mkdtemp(prefix="artifacts-bench-rest-")
    env = {
        "ARTIFACTS_DATA_DIR": data_dir,
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "bench-" + "x" * 40,
        "ARTIFACTS_MAX_CONTENT_BYTES": str((args.blob_mib + 1) * MiB),
    }
    print(f"preparing {data_dir} (1k + 100k records, a {args.blob_mib} MiB blob) …", flush=True)
    info = prepare(env, args.blob_mib)
    port = free_port()
    server_env = {
        **os.environ,
        **env,
        "BENCH_BLOB_PATH": info["blob_path"],
        "PYTHONPATH": f"{ROOT / 'bench'}{os.pathsep}{ROOT}",
    }
    # The server's log goes to a file: a pipe nobody reads fills up (Django logs every 404) and
    # blocks the server.
    log = open(Path(data_dir) / "daphne.log", "w+b")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "rest_asgi:application",
        ],
        cwd=ROOT,
        env=server_env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                httpx.get(base + "/api/schema/", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            log.seek(0)
            raise SystemExit("daphne did not start: " + log.read().decode()[-2000:])
        with httpx.Client(base_url=base, timeout=60) as client:
            run_floor(client, args.requests)
            run_list(client, info, args.requests)
            run_tag(client, info, args.requests)
            run_handler(base, info, args.requests)
            run_content(client, info, server.pid, args.blob_mib, args.rounds)
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()
        if not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)


def run_floor(client, n: int) -> None:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        client.get("/bare/hello").raise_for_status()
        times.append((time.perf_counter() - start) * 1000)
    print(
        f"floor: raw ASGI hello on this daphne, p50 {percentile(times, 50):.2f} ms, p99 {percentile(times, 99):.2f} ms"
    )


def run_list(client, info, n: int) -> None:
    figures = {}
    for slug in ("a1k", "a100k"):
        headers = {"Authorization": f"Bearer {info[slug]}"}
        url = f"/{slug}/v1/artifacts?limit=50"
        for _ in range(20):
            client.get(url, headers=headers).raise_for_status()
        times = []
        for _ in range(n):
            start = time.perf_counter()
            response = client.get(url, headers=headers)
            times.append((time.perf_counter() - start) * 1000)
            assert response.status_code == 200 and len(response.json()["results"]) == 50
        figures[slug] = (percentile(times, 50), percentile(times, 99))
    print(f"list, 50-row page, {n} requests each (ms):")
    for slug, (p50, p99) in figures.items():
        print(f"  {slug:<6} p50 {p50:6.2f}  p99 {p99:6.2f}")
    print(
        f"  100k vs 1k: p50 {figures['a100k'][0] / figures['a1k'][0]:.2f}x, "
        f"p99 {figures['a100k'][1] / figures['a1k'][1]:.2f}x  (target <= 1.3x)"
    )


def run_tag(client, info, n: int) -> None:
    headers = {"Authorization": f"Bearer {info['tagger']}", "Content-Type": "application/json"}

    def tag(i: int) -> None:
        r = client.post(
            "/tagger/v1/artifacts",
            headers=headers,
            content=b'{"kind": "note", "data": {"i": %d}}' % i,
        )
        assert r.status_code == 201, r.text

    def bare(i: int) -> None:
        r = client.post(
            "/bare/insert",
            headers={"Content-Type": "application/json"},
            content=b'{"agent": "bare", "data": {"i": %d}}' % i,
        )
        assert r.status_code == 201, r.text

    rates = {}
    for name, fn in (("bare Django insert view", bare), ("POST artifacts (tag)", tag)):
        for i in range(20):
            fn(-i)
        start = time.perf_counter()
        for i in range(n):
            fn(i)
        rates[name] = n / (time.perf_counter() - start)
    print(f"tag over HTTP, {n} sequential requests:")
    for name, value in rates.items():
        print(f"  {name:<26} {value:7.0f} req/s")
    ratio = rates["bare Django insert view"] / rates["POST artifacts (tag)"]
    print(f"  tag vs bare insert: {ratio:.2f}x slower  (target <= 2x)")


def run_handler(base: str, info, n: int) -> None:
    """Our handler vs Django's stock ASGIHandler (bench/rest_asgi.py ``/stock/``), same routes."""
    import asyncio

    import httpx

    agent = {"Authorization": f"Bearer {info['a1k']}"}
    tagger = {"Authorization": f"Bearer {info['tagger']}", "Content-Type": "application/json"}
    cases = {
        "404": ("GET", "/a1k/v1/nowhere", {}, None, 404),
        "list": ("GET", "/a1k/v1/artifacts?limit=50", agent, None, 200),
        "tag": ("POST", "/tagger/v1/artifacts", tagger, b'{"kind": "note", "data": {}}', 201),
    }

    async def rate(prefix: str, case: tuple, in_flight: int) -> float:
        method, url, headers, body, status = case
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:

            async def one() -> None:
                r = await client.request(method, prefix + url, headers=headers, content=body)
                assert r.status_code == status, (prefix, url, r.status_code)

            for _ in range(10):
                await one()
            per_worker = max(1, n // in_flight)

            async def worker() -> None:
                for _ in range(per_worker):
                    await one()

            start = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(in_flight)))
            return per_worker * in_flight / (time.perf_counter() - start)

    print(
        f"handler: ours vs Django's stock ASGIHandler, same routes and daphne, {n} requests (req/s):"
    )
    for name, case in cases.items():
        for in_flight in (1, 8):
            # Interleaved, best of two each: the machine's noise hits both alike.
            runs = [
                asyncio.run(rate(prefix, case, in_flight))
                for _ in range(2)
                for prefix in ("/stock", "")
            ]
            stock, ours = max(runs[0::2]), max(runs[1::2])
            print(
                f"  {name:<5} {in_flight} in flight: stock {stock:7.0f}   ours {ours:7.0f}   = {ours / stock:.2f}x"
            )


def run_content(client, info, pid: int, blob_mib: int, rounds: int) -> None:
    headers = {"Authorization": f"Bearer {info['tagger']}"}
    cases = [
        ("bare ASGI, paced", "/bare/asgi-paced", {}),
        ("bare ASGI app", "/bare/asgi", {}),
        ("GET content (ours)", f"/tagger/v1/artifacts/{info['blob_id']}/content", headers),
        ("Django FileResponse", "/bare/file", {}),
    ]
    results: dict[str, tuple[float, float]] = {}
    for _ in range(rounds):  # interleaved rounds: best MB/s, worst RSS growth of each case
        for name, url, hdrs in cases:
            with RSSPeak(pid) as rss:
                start = time.perf_counter()
                got = 0
                with client.stream("GET", url, headers=hdrs) as response:
                    assert response.status_code == 200
                    for chunk in response.iter_raw(MiB):
                        got += len(chunk)
                elapsed = time.perf_counter() - start
            assert got == blob_mib * MiB, (name, got)
            best, worst = results.get(name, (0.0, 0.0))
            results[name] = (max(best, got / elapsed / 1e6), max(worst, rss.growth_mib))
    print(
        f"content, {blob_mib} MiB blob, best of {rounds} interleaved rounds (MB/s; worst server RSS growth during a download):"
    )
    for name, (mbs, growth) in results.items():
        print(f"  {name:<22} {mbs:7.0f} MB/s   RSS +{growth:6.1f} MiB")
    ours, ceiling, file_resp = (
        results[k][0] for k in ("GET content (ours)", "bare ASGI, paced", "Django FileResponse")
    )
    print(
        f"  ours vs bare ASGI (paced): {ours / ceiling:.0%}, vs unpaced: {ours / results['bare ASGI app'][0]:.0%}"
        f" (target >= 60%); vs FileResponse: "
        f"{ours / file_resp:.2f}x (target >= 1); RSS growth {results['GET content (ours)'][1]:.1f} MiB (target < 32)"
    )


if __name__ == "__main__":
    main()
